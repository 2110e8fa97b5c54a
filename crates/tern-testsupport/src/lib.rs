//! tern-testsupport (placeholder)
