//! The files a scenario names, read: its trace (found, imported, one conversation picked and
//! compiled) and a profile file. With the scenario file itself, this is all the input and
//! output of loading a scenario; [`super::validate`] is pure and takes what is read here, a
//! file that cannot be read being one more of the scenario's problems.

use std::path::{Path, PathBuf};

use super::dto::{CALIBRATED, ProfileRefDto, ScenarioDto};
use super::locate::Ctx;
use crate::engine::profile::Profile;
use crate::error::{Error, Result};
use crate::trace::Trace;
use crate::trace::compile::{Compiled, compile};

/// What a scenario's files hold, each read or why not.
#[derive(Default)]
pub struct Files {
    /// `trace = …`, when the scenario names one.
    pub trace: Option<Result<Replay>>,
    /// The profile file `profile = "…"` or `[profile] base = "…"` names (not `default` or
    /// `calibrated`, which are no files).
    pub profile: Option<Result<Profile>>,
}

/// Reads the files the scenario `dto` names; `ctx` is the scenario file, where paths resolve
/// and errors point.
pub fn read(ctx: &Ctx, dto: &ScenarioDto) -> Files {
    let trace = match (&dto.trace, &dto.task) {
        (Some(rel), None) => Some(load_trace(ctx, rel, dto)),
        _ => None,
    };
    let base = match &dto.profile {
        Some(ProfileRefDto::Path(name)) => Some(name.as_str()),
        Some(ProfileRefDto::Overrides(o)) => o.base.as_deref(),
        None => None,
    };
    let profile = base.filter(|b| *b != "default" && *b != CALIBRATED).map(|name| read_profile(ctx, name));
    Files { trace, profile }
}

/// A profile file: TOML, its figures checked.
fn read_profile(ctx: &Ctx, name: &str) -> Result<Profile> {
    load_profile(&resolve_key(ctx, "profile", name)?)
}

/// A profile file at `path`: TOML, its figures checked.
pub fn load_profile(path: &Path) -> Result<Profile> {
    let src = crate::input::read_text(path, crate::input::Input::Config)?;
    let p: Profile =
        toml::from_str(&src).map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?;
    p.validate().map_err(|(k, exp)| Error::invalid(path, None, k, exp))?;
    Ok(p)
}

/// Resolves a path named in a scenario: next to the scenario file, then in its folder's
/// parent (the suite root), then from the current directory. `Err` lists every path tried.
pub fn resolve(file: &Path, rel: &str) -> std::result::Result<PathBuf, Vec<PathBuf>> {
    let rel = Path::new(rel);
    let dir = file.parent().unwrap_or(Path::new("."));
    let tried: Vec<PathBuf> = if rel.is_absolute() {
        vec![rel.to_owned()]
    } else {
        vec![dir.join(rel), dir.join("..").join(rel), rel.to_owned()]
    };
    tried.iter().find(|p| p.exists()).cloned().ok_or(tried)
}

/// The file a scenario key names, or an error naming the key and every path tried.
fn resolve_key(ctx: &Ctx, key: &str, rel: &str) -> Result<PathBuf> {
    resolve(ctx.file, rel).map_err(|tried| {
        let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        ctx.err(key, format!("an existing file; {rel:?} was not found at {}", tried.join(", ")))
    })
}

/// A scenario's trace and what it compiles to.
pub struct Replay {
    pub trace: Trace,
    pub compiled: Compiled,
}

fn load_trace(ctx: &Ctx, rel: &str, dto: &ScenarioDto) -> Result<Replay> {
    use crate::trace::import::conversation::FailureRules;
    use crate::trace::import::{ImportOptions, SourceFormat, import_path};
    let (select, pick) = (dto.trace_select.as_deref(), dto.trace_conversation);
    let format_name = dto.trace_format.as_deref().unwrap_or("auto");
    let format = SourceFormat::parse(format_name).ok_or_else(|| {
        ctx.err("trace_format", format!("one of {}, got {format_name:?}", SourceFormat::NAMES.join(", ")))
    })?;
    let path = resolve_key(ctx, "trace", rel)?;
    if let Some(ptr) = select
        && !ptr.is_empty()
        && !ptr.starts_with('/')
    {
        return Err(
            ctx.err("trace_select", format!("a JSON pointer, which starts with `/` (e.g. \"/13/traj\"), got {ptr:?}"))
        );
    }
    let rules = match &dto.trace_failure_rules {
        None => FailureRules::default(),
        Some(patterns) => FailureRules::from_patterns(patterns)
            .map_err(|e| ctx.err("trace_failure_rules", format!("regular expressions: {e}")))?,
    };
    let opts =
        ImportOptions { format, select: select.map(str::to_owned), select_key: "trace_select", rules, lenient: false };
    let mut traces = import_path(&path, &opts)
        .map_err(|e| match e {
            // The pointer is the scenario's: say so there, and where it looked.
            Error::Invalid { field, expected, .. } if field == "trace_select" => {
                ctx.err("trace_select", format!("{expected} in {}", path.display()))
            }
            // The trace file's own error (file, line, field), under the scenario's `trace` key.
            e => ctx.err("trace", format!("a trace tracefault can read; {e}")),
        })?
        .traces;
    let n = traces.len();
    let index = match pick {
        Some(k) if (1..=n).contains(&k) => k - 1,
        Some(k) => {
            return Err(ctx.err("trace_conversation", format!("1 to {n}, got {k}")));
        }
        None if n == 1 => 0,
        None => {
            return Err(ctx.err(
                "trace",
                format!(
                    "one conversation; {} holds {n} (pick one with trace_conversation = N or trace_select = \"/…\")",
                    path.display()
                ),
            ));
        }
    };
    let trace = traces.swap_remove(index);
    let compiled = compile(&trace);
    Ok(Replay { trace, compiled })
}
