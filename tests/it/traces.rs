//! What the importer tests share: a fixture's path, and what `inspect` and `import` make of a
//! file, through the real binary.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{root, tracefault};

/// `tests/fixtures/<folder>/<name>`.
pub fn fixture(folder: &str, name: &str) -> PathBuf {
    root().join("tests/fixtures").join(folder).join(name)
}

/// The `inspect --json` lines of a file (one per conversation), and what it said on stderr;
/// the command must succeed.
pub fn inspect_json(path: &Path, extra: &[&str]) -> (Vec<Value>, String) {
    let out = tracefault().arg("inspect").arg(path).args(extra).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}: {stderr}", path.display());
    let lines = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, stderr)
}

/// The `inspect` table of a file; the command must succeed.
pub fn inspect_table(path: &Path) -> String {
    let out = tracefault().arg("inspect").arg(path).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The native traces `import` writes for a file (`OUT.jsonl`, or `OUT-1.jsonl` … for several),
/// each as its lines parsed, in conversation order.
pub fn imported(path: &Path) -> Vec<Vec<Value>> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let run = tracefault().arg("import").arg(path).arg("-o").arg(&out).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    // t-2.jsonl before t-10.jsonl.
    files.sort_by_key(|f| {
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        stem.rsplit_once('-').and_then(|(_, n)| n.parse::<usize>().ok()).unwrap_or(0)
    });
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect())
        .collect()
}
