//! Metrics (the book: metrics): each run's events fold into a [`run::RunMetrics`]; runs aggregate into
//! exact integer sums per (scenario, strategy) ([`aggregate`]); [`summary`] turns those into
//! the rows of `summary.csv`, with intervals from [`stats`].

pub mod aggregate;
pub mod recorded;
pub mod run;
pub mod stats;
pub mod summary;
