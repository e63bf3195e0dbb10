//! Reading input files under a size cap, so a wrong path (a device, a huge file) is refused
//! with a clear error instead of exhausting memory. One knob raises every cap:
//! `TRACEFAULT_MAX_INPUT_MB`.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// The environment variable that sets every cap, in MiB.
pub const CAP_ENV: &str = "TRACEFAULT_MAX_INPUT_MB";

/// What an input is, and its default cap in MiB.
#[derive(Clone, Copy, Debug)]
pub enum Input {
    /// Scenario files, profiles, shard manifests.
    Config,
    /// Traces to import, inspect, replay or calibrate from.
    Trace,
}

impl Input {
    fn default_mib(self) -> u64 {
        match self {
            Input::Config => 16,
            Input::Trace => 1024,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Input::Config => "configuration files",
            Input::Trace => "traces",
        }
    }

    /// The cap in bytes: `TRACEFAULT_MAX_INPUT_MB` when set, else the default.
    pub fn cap_bytes(self) -> u64 {
        let mib = std::env::var(CAP_ENV).ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(self.default_mib());
        mib.saturating_mul(1 << 20)
    }
}

/// Reads `path` as UTF-8 text, refusing more than the cap for `kind` (checked while reading,
/// so a device that never ends is stopped at the cap).
pub fn read_text(path: &Path, kind: Input) -> Result<String> {
    let cap = kind.cap_bytes();
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(Error::Usage(format!("{}: is a folder, not a file", path.display())));
    }
    // Sized once from the file's length (a pipe or device says 0 and grows as it reads).
    let size = file.metadata().map_or(0, |m| m.len()).min(cap + 1);
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0) + 1);
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(Error::Usage(format!(
            "{}: larger than the {} MiB cap for {} (set {CAP_ENV}=N to allow N MiB)",
            path.display(),
            cap >> 20,
            kind.name()
        )));
    }
    String::from_utf8(bytes).map_err(|e| Error::Parse {
        file: path.display().to_string(),
        message: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_device_stops_at_the_cap() {
        let cap = Input::Config.cap_bytes();
        assert!(cap >= 1 << 20);
        if Path::new("/dev/zero").exists() {
            let e = read_text(Path::new("/dev/zero"), Input::Config).unwrap_err().to_string();
            assert!(e.contains("MiB cap") && e.contains(CAP_ENV), "{e}");
        }
    }
}
