//! Error types, one per failure a user can act on, and the documented exit codes.

use std::path::PathBuf;

/// A hunt file or workload file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for its schema.
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A field has a value that cannot be used.
    #[error("{}: {field}: {message}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// Dotted field name, e.g. `hosts[1].accel`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Process exit codes of the `firstbad` binary.
pub mod exit_code {
    /// The first bad commit was found (or the command succeeded).
    pub const OK: u8 = 0;
    /// An unexpected error.
    pub const ERROR: u8 = 1;
    /// The hunt file, a revision or the command line is wrong, the state directory holds a
    /// hunt's files but no whole journal of it, or its journal's verdicts do not fit this
    /// range (another hunt's); nothing was run. Also a test that can never run, found at its
    /// first run: a command Linux refuses for its length, an output larger than firstbad reads
    /// for a metric (a rerun would meet it again).
    pub const BAD_INPUT: u8 = 2;
    /// Good and bad measured alike: the regression did not reproduce.
    pub const NOT_REPRODUCED: u8 = 3;
    /// Only skipped commits are left (the culprit is one of a range), the final re-test does
    /// not confirm the culprit, or `firstbad watch`'s automatic hunt spent its boot budget
    /// without an answer.
    pub const AMBIGUOUS: u8 = 4;
    /// The hunt stopped on an infrastructure failure (a host, a baseline build, a host that
    /// drifted, a journal write that failed); rerun resumes. Also a hunt that ended but could
    /// not save its end (its state directory was removed or replaced during the run): the end
    /// is not given.
    pub const INFRASTRUCTURE: u8 = 5;
    /// Stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it. The builds and boots
    /// under way were stopped; the journal holds every finished step; rerun resumes.
    pub const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM (a service manager, `kill`): 128 + 15, otherwise as [`INTERRUPTED`].
    pub const TERMINATED: u8 = 143;
}
