//! What to undo when the process is interrupted (Ctrl-C, SIGTERM, SIGHUP): temporaries to
//! remove and agent process groups to kill. The handler is installed on first use; it undoes
//! everything registered, then exits with status 130 as an interrupted command does.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

#[derive(Default)]
struct Pending {
    paths: Vec<PathBuf>,
    groups: Vec<i32>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending { paths: Vec::new(), groups: Vec::new() });
static HANDLER: Once = Once::new();

fn install() {
    HANDLER.call_once(|| {
        // If another handler is already installed, temporaries are still removed by the next
        // write into the same folder.
        let _ = ctrlc::set_handler(|| {
            undo();
            std::process::exit(130);
        });
    });
}

/// Kills the registered process groups and removes the registered temporaries.
pub fn undo() {
    let Ok(mut p) = PENDING.lock() else { return };
    for g in p.groups.drain(..) {
        kill_group(g);
    }
    for path in p.paths.drain(..) {
        let _ = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
    }
}

/// Sends SIGKILL to every process of group `pgid`.
pub fn kill_group(pgid: i32) {
    #[cfg(unix)]
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Removes `path` if the process is interrupted before [`forget_path`].
pub fn remove_on_interrupt(path: &Path) {
    install();
    if let Ok(mut p) = PENDING.lock() {
        p.paths.push(path.to_owned());
    }
}

pub fn forget_path(path: &Path) {
    if let Ok(mut p) = PENDING.lock() {
        p.paths.retain(|x| x != path);
    }
}

/// Kills process group `pgid` if the process is interrupted before [`forget_group`].
pub fn kill_on_interrupt(pgid: i32) {
    install();
    if let Ok(mut p) = PENDING.lock() {
        p.groups.push(pgid);
    }
}

pub fn forget_group(pgid: i32) {
    if let Ok(mut p) = PENDING.lock() {
        p.groups.retain(|&g| g != pgid);
    }
}
