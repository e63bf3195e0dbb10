//! The progress bar the long commands (`run`, `sweep`) draw on stderr.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr over `total` `unit`s, hidden when stderr is not a terminal or under CI.
pub fn progress_bar(total: u64, unit: &str) -> ProgressBar {
    let show = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let bar = ProgressBar::with_draw_target(
        Some(total),
        if show { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() },
    );
    if let Ok(style) = ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {unit} {{eta}}")) {
        bar.set_style(style);
    }
    bar
}
