//! A clean interrupt (issue 34, item 4): Ctrl-C (SIGINT) or SIGTERM stops a command that
//! builds and boots without leaving anything behind, and says so.
//!
//! [`block_on`] runs the command's future until it ends or a signal comes. On a signal the
//! future is dropped: every qemu, ssh and console child it spawned goes with it (they are
//! spawned `kill_on_drop`), and boots under way are left undone, as after `kill -9`. A build
//! runs `make` on a blocking thread in its own process group, which neither the drop nor a
//! terminal's Ctrl-C reaches; it polls [`requested`] and kills the group
//! (`build::run_with_deadline`), so no `make` goes on writing into the build directory that
//! the resumed hunt builds in next. The journal holds every step that finished: each is
//! written before it is acted on, so a rerun of the same command resumes.
//!
//! A second Ctrl-C while this happens stops the process at once (the default action is put
//! back after the first).

use crate::error::exit_code;
use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signal that asked the process to stop, if one did.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// A command stopped by a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by {}", self.name())]
pub struct Interrupted {
    /// The signal's number.
    pub signal: i32,
}

impl Interrupted {
    /// `SIGINT` or `SIGTERM`.
    pub fn name(&self) -> &'static str {
        match self.signal {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "a signal",
        }
    }

    /// 128 + the signal's number, as a shell reports a process the signal ended:
    /// [`exit_code::INTERRUPTED`] for SIGINT, [`exit_code::TERMINATED`] for SIGTERM.
    pub fn exit_code(&self) -> u8 {
        match self.signal {
            libc::SIGINT => exit_code::INTERRUPTED,
            _ => exit_code::TERMINATED,
        }
    }
}

/// Runs `fut` on `rt` until it ends, or until SIGINT or SIGTERM: then the future is dropped,
/// blocking builds are told to stop ([`requested`]), and `Err` says which signal it was.
pub fn block_on<F: Future>(
    rt: &tokio::runtime::Runtime,
    fut: F,
) -> std::io::Result<Result<F::Output, Interrupted>> {
    use tokio::signal::unix::{signal, SignalKind};
    let out = rt.block_on(async {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        Ok::<_, std::io::Error>(tokio::select! {
            out = fut => Ok(out),
            _ = int.recv() => Err(Interrupted { signal: libc::SIGINT }),
            _ = term.recv() => Err(Interrupted { signal: libc::SIGTERM }),
        })
    })?;
    if let Err(i) = &out {
        SIGNAL.store(i.signal, Ordering::SeqCst);
        // SAFETY: signal(2) with the default disposition; no handler of ours runs after it.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
        }
    }
    Ok(out)
}

/// What a person reads after an interrupt: the state of the journal and how to go on.
pub fn message(i: &Interrupted, resume: &str) -> String {
    format!(
        "firstbad: {i}: stopped the builds and boots under way; the journal holds every step \
         that finished, and what was running runs again when you resume: {resume}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(
            Interrupted {
                signal: libc::SIGINT
            }
            .exit_code(),
            130
        );
        assert_eq!(
            Interrupted {
                signal: libc::SIGTERM
            }
            .exit_code(),
            143
        );
        assert_eq!(
            Interrupted {
                signal: libc::SIGTERM
            }
            .name(),
            "SIGTERM"
        );
    }
}
