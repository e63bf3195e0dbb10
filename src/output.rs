//! Writing what tracefault produces so that a reader never sees half of it.
//!
//! - A single file goes through a temporary file in its folder and a rename. A path that is a
//!   symlink is written through (the link's target is replaced, never the link); a FIFO or a
//!   device (`/dev/stdout`) is written to directly; a folder is refused.
//! - A report folder is written as a set: every file into a staging folder beside it, then the
//!   staging folder is swapped with the old one in one step (Linux `renameat2` with
//!   `RENAME_EXCHANGE`), so a reader sees all the old files or all the new ones. Where that
//!   cannot be done (the folder holds files that are not tracefault's, or the filesystem
//!   refuses the exchange) the files are renamed into place one by one, and files of the old
//!   set the new one does not have are removed.
//! - Temporaries carry the writer's process id. Ctrl-C and SIGTERM remove them; a later write
//!   into the same folder removes those whose writer is gone (after `kill -9`, say).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The mark in every temporary's name, followed by the writer's pid.
const MARK: &str = ".tracefault-";

/// Files tracefault writes into an output folder: a folder holding only these (and its own
/// temporaries) may be swapped whole.
const OURS: [&str; 17] = [
    "summary.csv",
    "runs.csv",
    "report.json",
    "report.md",
    "junit.xml",
    "report.html",
    "comparison.md",
    "comparison.json",
    "shard.json",
    "runs.part",
    "exec.json",
    "traces",
    "mcp",
    "sweep.csv",
    "sweep.json",
    "sweep-shard.json",
    "scenarios",
];

/// A temporary's name for `name`: `.NAME.tracefault-PID-N`.
fn temp_name(name: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".{name}{MARK}{}-{n}", std::process::id())
}

/// Whether a temporary's writer is gone: its pid (in the name) is not a live process.
fn stale(name: &str) -> bool {
    let Some(rest) = name.split(MARK).nth(1) else { return false };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { return false };
    pid != std::process::id() && Path::new("/proc").is_dir() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes temporaries in `dir` whose writers are gone, once per folder and process (a
/// thousand files written into one folder list it once, not a thousand times).
fn remove_stale(dir: &Path) {
    static CLEANED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    {
        let mut cleaned = CLEANED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cleaned.iter().any(|d| d == dir) {
            return;
        }
        cleaned.push(dir.to_owned());
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && stale(&name) {
            let p = e.path();
            let _ = if p.is_dir() { fs::remove_dir_all(&p) } else { fs::remove_file(&p) };
        }
    }
}

/// Where a write to `path` lands: a symlink's final target, else the path itself.
fn through_links(path: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            // The target may not exist yet: resolve its folder, keep its name.
            let target = fs::read_link(path).map_err(|e| Error::io(path, e))?;
            let target =
                if target.is_absolute() { target } else { path.parent().unwrap_or(Path::new(".")).join(target) };
            through_links(&target)
        }
        _ => Ok(path.to_owned()),
    }
}

/// Writes `bytes` to the file `path` so a reader never sees half of it (see the module doc).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = FileWriter::begin(path)?;
    f.write(bytes)?;
    f.commit()
}

/// A file written in pieces that appears at its path whole, on [`FileWriter::commit`], or not
/// at all (dropped uncommitted, its temporary is removed).
pub struct FileWriter {
    path: PathBuf,
    /// The temporary, for a regular file; `None` when writing through a FIFO or a device.
    tmp: Option<PathBuf>,
    file: std::io::BufWriter<fs::File>,
}

impl FileWriter {
    pub fn begin(path: &Path) -> Result<FileWriter> {
        let path = through_links(path)?;
        match fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                return Err(Error::Usage(format!("{}: is a folder; name a file to write", path.display())));
            }
            Ok(m) if !m.is_file() => {
                // A FIFO, a terminal, a device: write through it; it cannot be replaced.
                let f = fs::OpenOptions::new().write(true).open(&path).map_err(|e| Error::io(&path, e))?;
                return Ok(FileWriter { path, tmp: None, file: std::io::BufWriter::new(f) });
            }
            _ => {}
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::Usage(format!("{}: not a file name", path.display())))?;
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        remove_stale(dir);
        let tmp = dir.join(temp_name(name));
        crate::interrupt::remove_on_interrupt(&tmp);
        match fs::File::create(&tmp) {
            Ok(f) => Ok(FileWriter { path, tmp: Some(tmp), file: std::io::BufWriter::with_capacity(1 << 16, f) }),
            Err(e) => {
                crate::interrupt::forget_path(&tmp);
                Err(Error::io(&path, e))
            }
        }
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.write_with(|w| w.write_all(bytes))
    }

    /// Writes what `write` puts into the file's buffered writer.
    pub fn write_with(&mut self, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
        write(&mut self.file).map_err(|e| Error::io(&self.path, e))
    }

    /// Makes the file appear whole at its path. No fsync: the rename is what makes the file
    /// appear whole to a reader; flushing a large runs.csv to disk would cost more than the
    /// simulation behind it.
    pub fn commit(mut self) -> Result<()> {
        let flushed = self.file.flush();
        let Some(tmp) = self.tmp.take() else { return flushed.map_err(|e| Error::io(&self.path, e)) };
        let done = flushed.and_then(|_| fs::rename(&tmp, &self.path));
        if done.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        crate::interrupt::forget_path(&tmp);
        done.map_err(|e| Error::io(&self.path, e))
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = fs::remove_file(&tmp);
            crate::interrupt::forget_path(&tmp);
        }
    }
}

/// Creates `path` (readable like any output file) with `bytes`.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)?;
    f.flush()
}

/// A report folder being written as a set; nothing is visible at `out` until `commit`.
pub struct FolderWriter {
    out: PathBuf,
    staging: PathBuf,
}

impl FolderWriter {
    /// Starts writing the set that will replace the folder `out` (created if missing).
    pub fn begin(out: &Path) -> Result<FolderWriter> {
        let out = through_links(out)?;
        if fs::metadata(&out).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::Usage(format!("{}: is not a folder; --out names a folder", out.display())));
        }
        let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("reports").to_owned();
        // Beside the folder, so the swap is a rename on one filesystem; inside it when it has
        // no parent (the root).
        let parent = match out.parent() {
            Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
            Some(p) => p.to_owned(),
            None => out.clone(),
        };
        fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        remove_stale(&parent);
        if out.is_dir() {
            remove_stale(&out);
        }
        let staging = parent.join(temp_name(&name));
        fs::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
        crate::interrupt::remove_on_interrupt(&staging);
        Ok(FolderWriter { out, staging })
    }

    /// Where file `name` of the set is written (for streaming writers such as `runs.csv`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.staging.join(name)
    }

    /// The folder the set will be in.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Writes file `name` (a relative path; folders are created) of the set.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path(name);
        if let Some(dir) = p.parent() {
            fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        write_new(&p, bytes).map_err(|e| Error::io(&self.out.join(name), e))
    }

    /// Puts the set in place of the folder's old contents.
    pub fn commit(self) -> Result<()> {
        let result = self.swap();
        if self.staging.exists() {
            let _ = fs::remove_dir_all(&self.staging);
        }
        crate::interrupt::forget_path(&self.staging);
        result
    }

    fn swap(&self) -> Result<()> {
        let io = |e| Error::io(&self.out, e);
        if !self.out.exists() {
            return fs::rename(&self.staging, &self.out).map_err(io);
        }
        if only_ours(&self.out) && exchange(&self.staging, &self.out).is_ok() {
            // The old set is now at the staging path; commit removes it.
            return Ok(());
        }
        // One file at a time: each rename is atomic, the set is not.
        let new: Vec<String> = names(&self.staging);
        for name in &new {
            let to = self.out.join(name);
            if to.is_dir() {
                fs::remove_dir_all(&to).map_err(io)?;
            }
            fs::rename(self.staging.join(name), &to).map_err(io)?;
        }
        for old in names(&self.out) {
            if OURS.contains(&old.as_str()) && !new.contains(&old) {
                let p = self.out.join(&old);
                let _ = if p.is_dir() { fs::remove_dir_all(&p) } else { fs::remove_file(&p) };
            }
        }
        Ok(())
    }
}

impl Drop for FolderWriter {
    /// A set that was never committed (an error on the way) leaves nothing behind.
    fn drop(&mut self) {
        if self.staging.exists() {
            let _ = fs::remove_dir_all(&self.staging);
        }
        crate::interrupt::forget_path(&self.staging);
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|it| it.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Whether every entry of `dir` is one of tracefault's own outputs or temporaries (so swapping
/// the folder loses nothing of anyone else's).
fn only_ours(dir: &Path) -> bool {
    names(dir).iter().all(|n| {
        OURS.contains(&n.as_str())
            || n.contains(MARK)
            || (n.starts_with("agent-run-") && n.ends_with(".log"))
            || n.starts_with(".runs.csv.")
    })
}

/// Swaps two paths in one step (Linux); elsewhere an error, and the caller renames file by file.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no atomic exchange"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_replaces_the_old_one_whole_and_drops_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reports");
        let w = FolderWriter::begin(&out).unwrap();
        w.write("summary.csv", b"old").unwrap();
        w.write("runs.csv", b"old runs").unwrap();
        w.commit().unwrap();
        let w = FolderWriter::begin(&out).unwrap();
        w.write("summary.csv", b"new").unwrap();
        assert_eq!(fs::read(out.join("summary.csv")).unwrap(), b"old", "nothing visible before commit");
        w.commit().unwrap();
        assert_eq!(fs::read(out.join("summary.csv")).unwrap(), b"new");
        assert!(!out.join("runs.csv").exists(), "an old runs.csv never stays beside new reports");
        assert_eq!(names(dir.path()), ["reports"], "no staging left behind");
    }

    #[test]
    fn a_folder_with_other_files_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("mine");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("notes.txt"), "keep").unwrap();
        fs::write(out.join("runs.csv"), "stale").unwrap();
        let w = FolderWriter::begin(&out).unwrap();
        w.write("summary.csv", b"new").unwrap();
        w.commit().unwrap();
        assert_eq!(names(&out), ["notes.txt", "summary.csv"]);
    }

    #[test]
    fn files_are_written_through_links_and_into_devices() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.jsonl");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, b"x").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        assert_eq!(fs::read(&target).unwrap(), b"x");
        if Path::new("/dev/null").exists() {
            write_file(Path::new("/dev/null"), b"x").unwrap();
            assert!(!fs::metadata("/dev/null").unwrap().is_file(), "the device stays a device");
        }
        assert!(write_file(dir.path(), b"x").is_err(), "a folder is refused");
    }

    #[test]
    fn temporaries_of_dead_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0 is never a live writer's.
        let dead = dir.path().join(format!(".runs.csv{MARK}0-1"));
        fs::write(&dead, "half").unwrap();
        let mine = dir.path().join(temp_name("x"));
        fs::write(&mine, "in progress").unwrap();
        write_file(&dir.path().join("out.json"), b"{}").unwrap();
        assert!(!dead.exists());
        assert!(mine.exists(), "a live writer's temporary is left alone");
    }
}
