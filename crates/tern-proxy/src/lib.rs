//! tern-proxy (placeholder)
