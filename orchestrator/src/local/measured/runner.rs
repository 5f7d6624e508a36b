//! A metric command hunt's runners: `[test] command` run in a built tree, one run a sample.

use super::super::process;
use super::{last_lines, MAX_OUTPUT_BYTES};
use crate::error::HostError;
use crate::exec::{BootJob, Task, TestHost};
use crate::hunt::short;
use crate::journal::BootOutcome;
use crate::metric::MetricSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One runner: runs the command in a built tree, one sample at a time.
pub(super) struct Runner {
    pub(super) name: String,
    pub(super) command: String,
    pub(super) timeout: Duration,
    pub(super) output: Option<PathBuf>,
    pub(super) metric: MetricSpec,
}

impl TestHost for Runner {
    fn name(&self) -> &str {
        &self.name
    }

    fn boot(self: Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.sample(&job))
                .await
                .unwrap_or_else(|e| Err(HostError::Missing(format!("the run's thread: {e}"))))
        })
    }
}

impl Runner {
    /// One run of the command on `job`'s tree: a sample, a failed sample, or the hunt's end.
    fn sample(&self, job: &BootJob) -> Result<BootOutcome, HostError> {
        let tree = &job.image;
        let failed = |reason: String| BootOutcome::Failed {
            reason,
            console: job.console.clone(),
            untestable: false,
        };
        // Never a sample of another commit: the tree must hold the commit it was built for.
        match head_of(tree) {
            Ok(head) if head == job.release => {}
            Ok(head) => {
                return Ok(failed(format!(
                    "the tree {} holds {}, not {}",
                    tree.display(),
                    short(&head),
                    short(&job.release)
                )))
            }
            Err(e) => return Ok(failed(format!("the tree {}: {e}", tree.display()))),
        }
        let io = |what: String| move |source| HostError::Io { what, source };
        if let Some(dir) = job.console.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        // One run in a tree at a time: with `jobs` > 1 two runners may sample one commit, and
        // the second would read (or delete) the first's result file. Held until this returns.
        let lock_path = tree.with_extension("run.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(format!("opening {}", lock_path.display())))?;
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock(2) on a descriptor this function owns; blocking is this thread's.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(io(format!("locking {}", lock_path.display()))(
                    std::io::Error::last_os_error(),
                ));
            }
        }
        // A result file left by the previous run must not be read as this run's. Removed
        // inside the checkout only: through a directory that is a link it would be someone
        // else's file (issue 32, finding 2).
        if let Some(rel) = &self.output {
            if let Err(e) = crate::files::remove_inside(tree, rel) {
                return Ok(failed(format!(
                    "cannot remove the last run's {}: {e}",
                    rel.display()
                )));
            }
        }
        let stdout_path = job.console.with_extension("stdout");
        let stdout = std::fs::File::create(&stdout_path)
            .map_err(io(format!("creating {}", stdout_path.display())))?;
        let stderr = std::fs::File::create(&job.console)
            .map_err(io(format!("creating {}", job.console.display())))?;
        let run = job.boot.to_string();
        let ran = process::run_shell(
            &self.command,
            tree,
            &[
                ("FIRSTBAD_COMMIT", job.release.as_str()),
                ("FIRSTBAD_RUN", &run),
            ],
            (stdout, stderr),
            self.timeout,
            |_| {},
        )
        .map_err(process::RunError::into_host_error)?;
        let said = || {
            let mut l = last_lines(&job.console, 1);
            l.pop().map(|l| format!(": {l}")).unwrap_or_default()
        };
        if ran.timed_out {
            return Ok(failed(format!(
                "timed out after {} s{}",
                self.timeout.as_secs(),
                said()
            )));
        }
        use std::os::unix::process::ExitStatusExt;
        match (ran.status.code(), ran.status.signal()) {
            (Some(0), _) => {}
            (Some(125), _) => {
                return Ok(BootOutcome::Failed {
                    reason: format!("exit 125: the command cannot test this commit{}", said()),
                    console: job.console.clone(),
                    untestable: true,
                })
            }
            (Some(code @ 1..=124), _) => {
                return Ok(failed(format!("exit {code}{}", said())));
            }
            (code, signal) => {
                let how = match (code, signal) {
                    (Some(126), _) => "exit 126: the command cannot be executed".to_owned(),
                    (Some(127), _) => "exit 127: the command is not found".to_owned(),
                    (Some(c), _) => format!("exit {c}: the shell reports a signal or an error"),
                    (None, Some(s)) => format!("killed by signal {s}"),
                    (None, None) => "ended without a status".to_owned(),
                };
                return Err(HostError::Command(format!(
                    "[test] command {:?} on {}: {how}{}; see {}. Fix the command, then rerun \
                     to resume",
                    self.command,
                    short(&job.release),
                    said(),
                    job.console.display()
                )));
            }
        }
        let (text, beside) = match &self.output {
            // Read inside the checkout only, through no link, from a regular file, to the cap:
            // a link to a host file was quoted into the journal, a FIFO blocked the hunt and
            // /dev/zero was read until memory ran out (issue 32, finding 2).
            Some(rel) => match crate::files::open_inside(tree, rel)
                .and_then(|f| crate::files::read_capped(f, MAX_OUTPUT_BYTES))
            {
                Ok(bytes) => (
                    String::from_utf8_lossy(&bytes).into_owned(),
                    tree.join(rel).parent().map(Path::to_path_buf),
                ),
                // Bad input, not a failed run: a rerun, or the next commit, would write as
                // much (issue 32, finding 8).
                Err(crate::files::FileError::TooLarge { limit }) => {
                    return Err(HostError::BadInput(format!(
                        "test.output {} holds more than {limit} bytes, the most firstbad reads \
                         for a metric: write only the result there",
                        rel.display()
                    )))
                }
                Err(e) => return Ok(failed(format!("no result file {}: {e}", rel.display()))),
            },
            None => match std::fs::File::open(&stdout_path)
                .map_err(crate::files::FileError::from)
                .and_then(|f| crate::files::read_capped(f, MAX_OUTPUT_BYTES))
            {
                Ok(bytes) => (String::from_utf8_lossy(&bytes).into_owned(), None),
                // Bad input: a rerun would print as much (issue 32, finding 8).
                Err(crate::files::FileError::TooLarge { limit }) => {
                    return Err(HostError::BadInput(format!(
                        "[test] command {:?} printed more than {limit} bytes on stdout, the most \
                         firstbad reads for a metric: print only the result, or write it to a \
                         file and name that file in test.output",
                        crate::text::cut(&self.command, 60)
                    )))
                }
                Err(e) => {
                    return Err(HostError::Missing(format!(
                        "reading {}: {e}",
                        stdout_path.display()
                    )))
                }
            },
        };
        let reading = match crate::metric::read(&self.metric, &text, beside.as_deref()) {
            Ok(r) => r,
            Err(why) => return Ok(failed(format!("no metric: {why}"))),
        };
        // A value the statistics' log scale cannot hold is a failed run that says so, never
        // a sample (issue 32, finding 3).
        if let Err(e) = crate::sequential::comparable(&self.metric.field, reading.value) {
            return Ok(failed(format!("no usable metric: {e}")));
        }
        let mut result = firstbad_wire::WorkloadResult {
            kind: "command".into(),
            series: BTreeMap::new(),
            metrics: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            duration_s: ran.seconds,
            system: None,
            vmstat: Vec::new(),
        };
        result.set_metric(&self.metric.field, reading.value, "not a finite number");
        if !reading.samples.is_empty() {
            // The value above is from every sample; the journal keeps a bounded few.
            result.series.insert(
                self.metric.field.clone(),
                firstbad_wire::Series::bounded(
                    reading.unit.clone().unwrap_or_default(),
                    reading.samples,
                ),
            );
        }
        Ok(BootOutcome::Measured {
            kernel_release: job.release.clone(),
            boot_id: format!("{} run {}", self.name, job.boot),
            value: reading.value,
            result,
            console: job.console.clone(),
            boot_seconds: 0.0,
        })
    }
}

/// The commit a tree's HEAD names.
fn head_of(tree: &Path) -> Result<String, git2::Error> {
    let repo = git2::Repository::open(tree)?;
    let head = repo.head()?.peel_to_commit()?;
    Ok(head.id().to_string())
}
