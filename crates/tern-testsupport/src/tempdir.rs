//! A uniquely named directory under the system temp dir, removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A private temporary directory; tests running in parallel never share one.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/tern-test-<pid>-<n>-<label>`.
    pub fn new(label: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tern-test-{}-{}-{}", std::process::id(), n, label));
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir { path }
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Keep the files when asked to, so a failed test can be inspected.
        if std::env::var_os("TERN_KEEP_TEST_FILES").is_none() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
