//! Beyond one machine (the book: shards): `run --shard K/N` runs every N-th work unit and writes its
//! exact aggregates and runs.csv rows; `merge` combines the N shards into reports byte-identical
//! to one unsharded run. A fingerprint of the loaded suite makes sure every shard ran the same
//! thing; a shard's figures are checked before they are used: its version, a CRC-32 over its
//! units and over each unit's rows (a shard edited or damaged since it was written is refused —
//! a check against accidents and hand edits, not a signature), each unit's counts against its
//! runs, and its rows file against the lengths the manifest gives.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::rng::fnv1a64;
use crate::error::{Error, Result};
use crate::metrics::aggregate::Aggregate;
use crate::scenario::Loaded;
use crate::suite::{self, Merger, RunsSink, ScenarioResult};

pub const MANIFEST: &str = "shard.json";
pub const ROWS: &str = "runs.part";

/// `K/N`, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let (k, n) = s.split_once('/').ok_or_else(|| format!("expected K/N (e.g. 2/8), got {s:?}"))?;
        let (k, n): (usize, usize) =
            (k.trim().parse().map_err(|_| "K must be a number")?, n.trim().parse().map_err(|_| "N must be a number")?);
        if n == 0 || k == 0 || k > n {
            return Err(format!("expected 1 <= K <= N, got {k}/{n}"));
        }
        Ok(Shard { k, n })
    }
}

/// One unit's results in a shard: its aggregates, and where its rows are in `runs.part`.
#[derive(Debug, Serialize, Deserialize)]
pub struct UnitEntry {
    unit: usize,
    offset: u64,
    len: u64,
    /// CRC-32 of the unit's rows in `runs.part`.
    rows_crc: u32,
    aggregates: Vec<Aggregate>,
}

/// What a shard ran: scenario paths and overrides, so `merge` can load the same suite.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardSource {
    pub paths: Vec<PathBuf>,
    pub seed: Option<u64>,
    pub runs: Option<u64>,
    pub strategies: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    tracefault_version: String,
    source: ShardSource,
    fingerprint: String,
    shard: Shard,
    total_units: usize,
    with_rows: bool,
    /// CRC-32 of `units` (see [`units_crc`]).
    units_crc: u32,
    units: Vec<UnitEntry>,
}

/// A fixed hash of everything loaded (scenarios after overrides): shards must agree on it.
pub fn fingerprint(suite: &[Loaded]) -> String {
    format!("{:016x}", fnv1a64(format!("{suite:?}").as_bytes()))
}

/// The units shard K of N runs: every N-th, starting at K−1.
pub fn selected(total: usize, shard: Shard) -> Vec<usize> {
    (shard.k - 1..total).step_by(shard.n).collect()
}

/// Runs one shard into `out`.
pub fn run_shard(
    suite: &[Loaded],
    jobs: usize,
    shard: Shard,
    with_rows: bool,
    source: &ShardSource,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<usize> {
    let total = suite::units(suite).len();
    let sel = selected(total, shard);
    let set = crate::output::FolderWriter::begin(out)?;
    let part_path = set.path(ROWS);
    let mut part = std::io::BufWriter::new(std::fs::File::create(&part_path).map_err(|e| Error::io(&part_path, e))?);
    let mut offset = 0u64;
    let mut entries = Vec::new();
    suite::run_units(suite, jobs, &sel, with_rows, progress, &mut |r| {
        part.write_all(&r.rows)?;
        entries.push(UnitEntry {
            unit: r.unit,
            offset,
            len: r.rows.len() as u64,
            rows_crc: crc32fast::hash(&r.rows),
            aggregates: std::mem::take(&mut r.aggregates),
        });
        offset += r.rows.len() as u64;
        Ok(())
    })
    .map_err(|e| Error::io(out, e))?;
    let manifest = Manifest {
        tracefault_version: crate::report::VERSION.into(),
        source: source.clone(),
        fingerprint: fingerprint(suite),
        shard,
        total_units: total,
        with_rows,
        units_crc: units_crc(&entries),
        units: entries,
    };
    part.flush().map_err(|e| Error::io(&part_path, e))?;
    let text = serde_json::to_string(&manifest).expect("a manifest serializes");
    set.write(MANIFEST, text.as_bytes())?;
    set.commit()?;
    Ok(sel.len())
}

/// CRC-32 of a shard's units as a JSON value prints (keys sorted), so a reader can check it
/// from the file alone; as the struct serializes where a sum does not fit a JSON value.
fn units_crc(units: &[UnitEntry]) -> u32 {
    let text = serde_json::to_value(units)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| serde_json::to_string(units).expect("units serialize"));
    crc32fast::hash(text.as_bytes())
}

/// Refuses a shard whose figures do not add up: another version's, one changed since it was
/// written (its checksums), a unit that is not this shard's or has not one aggregate per
/// strategy with counts that match its runs, a rows file of another length than its units'.
fn check(suite: &[Loaded], all: &[suite::Unit], dir: &Path, m: &Manifest) -> Result<()> {
    let bad = |what: String| Err(Error::Usage(format!("{}: {what}; this shard cannot be merged", dir.display())));
    if m.tracefault_version != crate::report::VERSION {
        return bad(format!(
            "written by tracefault {}, this is {}: run every shard with the same version",
            m.tracefault_version,
            crate::report::VERSION
        ));
    }
    if units_crc(&m.units) != m.units_crc {
        return bad(format!("{MANIFEST} was changed after it was written (its units' checksum does not match)"));
    }
    if m.total_units != all.len() {
        return bad(format!("it has {} work units, this suite {}", m.total_units, all.len()));
    }
    let mine = selected(all.len(), m.shard);
    if m.units.iter().map(|e| e.unit).ne(mine.iter().copied()) {
        return bad(format!("its units are not the ones shard {}/{} runs", m.shard.k, m.shard.n));
    }
    let mut offset = 0u64;
    for e in &m.units {
        let u = &all[e.unit];
        let sc = &suite[u.scenario];
        let unit = format!("work unit {} ({}, runs {}..{})", e.unit, sc.name, u.first, u.last);
        if e.aggregates.len() != sc.strategies.len() {
            return bad(format!("{unit}: {} aggregates for {} strategies", e.aggregates.len(), sc.strategies.len()));
        }
        for (a, st) in e.aggregates.iter().zip(&sc.strategies) {
            let runs = u.last - u.first;
            let hist: u64 = a.calls_hist.iter().fold(0u64, |s, &h| s.saturating_add(h));
            let ended: u64 = a.terminated.iter().fold(0u64, |s, &t| s.saturating_add(t));
            let calls =
                a.calls_hist.iter().enumerate().try_fold(0u64, |s, (c, &h)| s.checked_add((c as u64).checked_mul(h)?));
            let worst_ok = a.worst.is_none_or(|(_, run)| (u.first..u.last).contains(&run));
            if a.runs != runs || ended != runs || hist != runs || calls != Some(a.calls_sum) || !worst_ok {
                return bad(format!("{unit}, strategy {}: its counts do not match its {runs} runs", st.name));
            }
        }
        if m.with_rows && e.offset != offset {
            return bad(format!("{unit}: its rows start at byte {}, expected {offset}", e.offset));
        }
        offset = offset.saturating_add(e.len);
    }
    if m.with_rows {
        let path = dir.join(ROWS);
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if !meta.is_file() || meta.len() != offset {
            return bad(format!("{ROWS} is not the {offset}-byte file its units describe"));
        }
    }
    Ok(())
}

/// A shard's folder and its manifest.
pub type Shipped = (PathBuf, Manifest);

/// The suite a set of shards ran, loaded again from the first shard's source.
pub fn load_suite_of(dirs: &[PathBuf]) -> Result<(Vec<Loaded>, Vec<Shipped>)> {
    let mut manifests: Vec<Shipped> = Vec::new();
    for d in dirs {
        let path = d.join(MANIFEST);
        let text = crate::input::read_text(&path, crate::input::Input::Config)?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?;
        manifests.push((d.clone(), m));
    }
    let Some((_, first)) = manifests.first() else {
        return Err(Error::Usage("merge needs at least one shard folder".into()));
    };
    let src = &first.source;
    let opts = suite::RunOptions { jobs: 1, seed: src.seed, runs: src.runs, strategies: src.strategies.clone() };
    let mut suite = crate::scenario::load::load_suite(&src.paths)?;
    suite::apply_overrides(&mut suite, &opts)?;
    suite.retain(|sc| !sc.strategies.is_empty());
    Ok((suite, manifests))
}

/// Whether every shard wrote its runs.csv rows (then the merge writes runs.csv).
pub fn with_rows(manifests: &[Shipped]) -> bool {
    manifests.iter().all(|m| m.1.with_rows)
}

/// Merges shard folders: checks they are shards 1..N of this suite, then replays their unit
/// results in unit order into `sink` and the scenario results.
pub fn merge(suite: &[Loaded], manifests: Vec<Shipped>, sink: &mut dyn RunsSink) -> Result<Vec<ScenarioResult>> {
    let want = fingerprint(suite);
    let n = manifests.first().map_or(0, |m| m.1.shard.n);
    for (d, m) in &manifests {
        if m.fingerprint != want {
            return Err(Error::Usage(format!(
                "{}: this shard ran another suite (fingerprint {}, here {want}): same scenario files, --seed, --runs and --strategy are needed",
                d.display(),
                m.fingerprint
            )));
        }
        if m.shard.n != n {
            return Err(Error::Usage(format!(
                "{}: shard {}/{} does not belong with shards of {n}",
                d.display(),
                m.shard.k,
                m.shard.n
            )));
        }
    }
    let mut ks: Vec<usize> = manifests.iter().map(|m| m.1.shard.k).collect();
    ks.sort_unstable();
    if ks != (1..=n).collect::<Vec<_>>() {
        return Err(Error::Usage(format!("merge needs shards 1 to {n} exactly once each; got {ks:?}")));
    }
    let all = suite::units(suite);
    for (d, m) in &manifests {
        check(suite, &all, d, m)?;
    }
    let with_rows = with_rows(&manifests);
    let total = all.len();
    // unit → (manifest, entry)
    let mut at: Vec<Option<(usize, usize)>> = vec![None; total];
    for (mi, (_, m)) in manifests.iter().enumerate() {
        for (ei, e) in m.units.iter().enumerate() {
            if let Some(slot) = at.get_mut(e.unit) {
                *slot = Some((mi, ei));
            }
        }
    }
    let mut merger = Merger::new(suite);
    let mut files: Vec<Option<std::fs::File>> = manifests.iter().map(|_| None).collect();
    let mut buf = Vec::new();
    for (unit, place) in at.iter().enumerate() {
        let Some((mi, ei)) = *place else {
            return Err(Error::Usage(format!("no shard holds work unit {unit}: a shard is incomplete")));
        };
        let (dir, m) = &manifests[mi];
        let e = &m.units[ei];
        merger.add(unit, &e.aggregates);
        if with_rows {
            let path = dir.join(ROWS);
            let f = match &mut files[mi] {
                Some(f) => f,
                slot => slot.insert(std::fs::File::open(&path).map_err(|err| Error::io(&path, err))?),
            };
            buf.resize(e.len as usize, 0);
            f.seek(SeekFrom::Start(e.offset))
                .and_then(|_| f.read_exact(&mut buf))
                .map_err(|err| Error::io(&path, err))?;
            if crc32fast::hash(&buf) != e.rows_crc {
                return Err(Error::Usage(format!(
                    "{}: the rows of work unit {unit} were changed after it was written (their checksum does not match); this shard cannot be merged",
                    path.display()
                )));
            }
            sink.rows(&buf).map_err(|err| Error::io(&path, err))?;
        }
    }
    Ok(merger.done)
}
