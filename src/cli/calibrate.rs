//! `tracefault calibrate`: fit a profile from traces and write it as TOML.

use std::path::PathBuf;

use clap::Args;

use super::import::SourceArgs;
use crate::calibrate::{Fit, observe};
use crate::engine::profile::Profile;
use crate::error::{Error, Result, exit};

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Trace files in any supported format.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    #[arg(long, default_value = "auto")]
    pub format: String,
    #[arg(long = "failure-rule", value_name = "REGEX")]
    pub failure_rules: Vec<String>,
    /// Observations a figure needs before it replaces the default.
    #[arg(long, default_value_t = crate::calibrate::DEFAULT_MIN_OBSERVATIONS)]
    pub min_observations: u64,
    /// The one encoding the traces' failures were all shown to the model in (a perception key:
    /// a live run's strategy's), folded into the fitted reactions: its accuracy is written as 1.
    #[arg(long, value_parser = ["envelope", "flag", "object", "prefix", "raw", "unmarked"])]
    pub encoding: Option<String>,
    #[arg(short = 'o', long = "out", value_name = "PROFILE.toml")]
    pub out: PathBuf,
}

pub fn execute(args: CalibrateArgs) -> Result<i32> {
    let mut fit = Fit::default();
    for path in &args.traces {
        let source = SourceArgs {
            trace: path.clone(),
            format: args.format.clone(),
            select: None,
            failure_rules: args.failure_rules.clone(),
            lenient: false,
        };
        for t in &source.import()?.traces {
            observe(t, &mut fit);
        }
    }
    let (profile, toml) = fit.profile(args.min_observations, args.encoding.as_deref());
    // What we write must load as a profile.
    let check: Profile =
        toml::from_str(&toml).map_err(|e| Error::Usage(format!("internal: calibrated profile does not parse: {e}")))?;
    debug_assert_eq!(check, profile);
    crate::output::write_file(&args.out, toml.as_bytes())?;
    print!("{toml}");
    println!("wrote {}", args.out.display());
    Ok(exit::OK)
}
