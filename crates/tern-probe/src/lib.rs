//! tern-probe (placeholder)
