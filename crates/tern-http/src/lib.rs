//! tern-http (placeholder)
