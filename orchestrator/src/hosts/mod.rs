//! Test hosts: where a candidate kernel boots and the agent measures it.
//!
//! A host either yields a booted, verified machine with a running agent, or a
//! [`BootFailure`]: a reason and the console log, which the hunt records as a failed boot
//! and never as a verdict.

pub mod cpio;
pub mod qemu;
pub mod ssh_conn;

use std::path::PathBuf;

/// A boot that did not give a verified, working test machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFailure {
    /// Why, for a person: `kernel panic: <line>`, `boot timeout after 180 s`,
    /// `wrong kernel: booted X, expected Y`.
    pub reason: String,
    /// The console log of that boot.
    pub console: PathBuf,
}

/// Console lines that end a boot as failed. A WARNING is not among them: it does not stop
/// the machine, and a regression hunt must not skip a commit for a harmless warning.
pub const FATAL_CONSOLE_MARKERS: &[&str] = &[
    "Kernel panic - not syncing",
    "BUG: ",
    "Oops: ",
    "general protection fault",
    "INFO: task hung",
    "firstbad-init: FAILED",
];

/// The first fatal marker in a console line, if any.
pub fn fatal_marker(line: &str) -> Option<&'static str> {
    FATAL_CONSOLE_MARKERS
        .iter()
        .copied()
        .find(|m| line.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_oopses_are_fatal_but_warnings_are_not() {
        assert!(
            fatal_marker("[    1.23] Kernel panic - not syncing: VFS: Unable to mount").is_some()
        );
        assert!(fatal_marker("[    2.00] BUG: kernel NULL pointer dereference").is_some());
        assert!(fatal_marker("[    2.00] WARNING: CPU: 0 PID: 1 at fs/ext4/inode.c").is_none());
    }
}
