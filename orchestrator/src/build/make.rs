//! make under a deadline, stopped with its whole process group; a failed build's root cause.

use super::*;

pub(super) enum MakeResult {
    Ok,
    Failed(i32),
    TimedOut,
}

pub(super) fn run_with_deadline(
    mut cmd: Command,
    deadline: Instant,
) -> Result<MakeResult, BuildError> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: prctl in the child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // If firstbad dies, even by SIGKILL, make is told to stop as on a deadline
            // (SIGTERM: it removes the targets it was making and stops its children), so that
            // it does not go on in the build directory that a rerun builds in next. The thread
            // that spawns make waits for it, so the signal does not come early.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(io("starting make"))?;
    loop {
        if let Some(status) = child.try_wait().map_err(io("waiting for make"))? {
            return Ok(if status.success() {
                MakeResult::Ok
            } else {
                MakeResult::Failed(status.code().unwrap_or(-1))
            });
        }
        if crate::interrupt::requested().is_some() {
            // firstbad is stopping (Ctrl-C, SIGTERM): make, in its own process group, must
            // not go on writing into the build directory a resumed hunt builds in next.
            stop_make(&mut child);
            return Err(BuildError::Interrupted);
        }
        if Instant::now() >= deadline {
            stop_make(&mut child);
            return Ok(MakeResult::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops make and everything it started (its process group): SIGTERM first, on which make
/// deletes the targets it was making (a compiler killed mid-write would leave a truncated
/// object newer than its source, which the next build in this directory would take as up to
/// date), then SIGKILL for what is left after 30 s.
fn stop_make(child: &mut std::process::Child) {
    let group = -(child.id() as i32);
    // SAFETY: kill(2) on a process group we created; no memory is involved.
    unsafe {
        libc::kill(group, libc::SIGTERM);
    }
    let patience = Instant::now() + Duration::from_secs(30);
    while Instant::now() < patience {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: as above. The group's other processes (compilers) are killed too, even when
    // make itself has ended.
    unsafe {
        libc::kill(group, libc::SIGKILL);
    }
    child.wait().ok();
}

/// The lines of a failed build log that say why: compiler and linker errors, and make's
/// own `***` lines, at most 20.
pub fn error_lines(log: &Path) -> Vec<String> {
    let Ok(f) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
        let l = line.trim_end();
        let wanted = l.contains(": error:")
            || l.contains(": fatal error:")
            || l.contains("undefined reference to")
            || l.starts_with("make") && l.contains("***") && !l.contains("Waiting for unfinished")
            || l.starts_with("ERROR:");
        if wanted {
            lines.push(l.to_owned());
            if lines.len() == 20 {
                break;
            }
        }
    }
    lines
}
