//! tern-bench (placeholder)
