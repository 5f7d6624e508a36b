//! The executor's parts for kernel hunts: the kernel builder behind [`super::Builder`] (the
//! hunt's choice between it and prebuilt kernels is [`crate::engine::Kernels`]), and the
//! running step's status line. The test hosts are [`crate::hosts`]'s, each behind
//! [`super::TestHost`].

use super::Task;
use crate::build::BuildError;
use crate::journal::BuildOutcome;
use std::sync::Arc;
use std::time::Duration;

/// The kernel builder (one build directory per config and toolchain), off the async threads.
pub struct KernelBuilder(pub Arc<crate::build::Builder>);

impl super::Builder for KernelBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        let (b, c) = (Arc::clone(&self.0), commit.to_owned());
        let log = self.0.log_path(commit);
        Box::pin(async move {
            let build = tokio::task::spawn_blocking(move || b.build(&c));
            tokio::pin!(build);
            // Make's progress, read back from its log, on the build's status line.
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    done = &mut build => return done.expect("a build does not panic"),
                    _ = tick.tick() => {
                        if let Some(progress) = make_progress(&log) {
                            status(&progress);
                        }
                    }
                }
            }
        })
    }
}

/// Sets the running step's status line (the span's message on a terminal).
pub fn status(message: &str) {
    use tracing_indicatif::span_ext::IndicatifSpanExt;
    tracing::Span::current().pb_set_message(message);
}

/// How far a kernel build is, from its log: the targets make has reported (`CC`, `LD`, `AR`,
/// ...) and the last of them, e.g. `412 targets, CC fs/ext4/fsync.o`.
pub fn make_progress(log: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let is_target = |l: &&str| {
        let mut w = l.split_whitespace();
        matches!(
            w.next(),
            Some("CC" | "LD" | "AR" | "AS" | "CC [M]" | "HOSTCC" | "GEN" | "OBJCOPY" | "BUILD")
        ) && w.next().is_some()
    };
    let targets: Vec<&str> = text.lines().filter(is_target).collect();
    let last = targets
        .last()?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(format!("{} targets, {last}", targets.len()))
}
