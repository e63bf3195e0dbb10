//! Typed errors and the exit-code table: 0 success, 1 a gate or check failed, 2 bad input.

use std::path::Path;

pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const BAD_INPUT: i32 = 2;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value in an input file is wrong: which file, where, which field, what was expected.
    #[error("{file}{}: {field}: expected {expected}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid { file: String, line: Option<usize>, field: String, expected: String },
    /// An input file does not parse.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
    /// Several problems of one input, each said on a line of its own.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\nerror: "))]
    Several(Vec<Error>),
}

impl Error {
    pub fn invalid(file: &Path, line: Option<usize>, field: impl Into<String>, expected: impl Into<String>) -> Error {
        Error::Invalid { file: file.display().to_string(), line, field: field.into(), expected: expected.into() }
    }

    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io { path: path.display().to_string(), source }
    }

    /// One error for a list of problems: the problem itself when there is one.
    pub fn several(mut problems: Vec<Error>) -> Error {
        if problems.len() == 1 { problems.remove(0) } else { Error::Several(problems) }
    }

    /// The problems an error stands for, one each.
    pub fn flatten(self) -> Vec<Error> {
        match self {
            Error::Several(all) => all,
            one => vec![one],
        }
    }

    pub fn exit_code(&self) -> i32 {
        exit::BAD_INPUT
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
