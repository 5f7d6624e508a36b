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

/// An error that is the host's or firstbad's, not the candidate's: the hunt stops on it.
///
/// It lives here, below the hunt, the executor and the hosts, because all three use it: a
/// host returns it, the executor passes it on, and the hunt wraps it
/// ([`crate::hunt::HuntError::Host`]).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A tool the host needs is missing.
    #[error("{0}")]
    Missing(String),
    /// The host is down and firstbad could not bring it back: a person must look at it.
    #[error("host {host} needs a person: {why}")]
    NeedsPerson {
        /// The host's name.
        host: String,
        /// What happened and what was tried.
        why: String,
    },
    /// The test itself cannot run, whatever host runs it (a metric hunt's command exited
    /// 126 or 127, or was killed by a signal): the hunt stops rather than retire the host.
    #[error("{0}")]
    Command(String),
    /// The test as configured can never run, on any host or commit (a command Linux refuses
    /// for its length, an output larger than firstbad reads): the hunt stops as bad input
    /// (exit 2), since a rerun would meet it again (issue 32, finding 8).
    #[error("{0}")]
    BadInput(String),
    /// The agent on the host refused this boot's token.
    #[error("host {host}: {why}")]
    Agent {
        /// The host's name.
        host: String,
        /// What happened.
        why: String,
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
