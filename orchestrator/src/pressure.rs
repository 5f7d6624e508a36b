//! This machine's pressure-stall information (`/proc/pressure/{cpu,io,memory}`, Linux 4.20
//! and later), read over each boot of a host that runs here (a local qemu VM): how much of the
//! boot's time some task on the machine waited for a CPU, for I/O or for memory (issue 56: a
//! neighbour that comes and goes is what moves a shared host's numbers; the journal keeps what
//! it did during each boot, and the report shows it beside the boot's value).

pub use crate::journal::HostPressure;
use std::path::Path;
use std::time::Instant;

/// The kernel's stall counters at one moment: each resource's `some ... total=` in µs (none
/// where the file is missing or unreadable: an old kernel, or PSI off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    at: Instant,
    some_us: [Option<u64>; 3],
}

/// The resources, in [`Snapshot`]'s order.
const RESOURCES: [&str; 3] = ["cpu", "io", "memory"];

impl Snapshot {
    /// Reads this machine's counters now.
    pub fn now() -> Snapshot {
        Snapshot::read(Path::new("/proc/pressure"))
    }

    /// Reads the counters of a `/proc/pressure`-shaped directory (tests give their own).
    pub fn read(dir: &Path) -> Snapshot {
        let some_us = RESOURCES.map(|r| {
            std::fs::read_to_string(dir.join(r))
                .ok()
                .and_then(|t| some_total(&t))
        });
        Snapshot {
            at: Instant::now(),
            some_us,
        }
    }

    /// The pressure between `earlier` and this snapshot; `None` when no resource was read
    /// both times.
    pub fn since(&self, earlier: &Snapshot) -> Option<HostPressure> {
        let seconds = self.at.duration_since(earlier.at).as_secs_f64();
        let share = |i: usize| {
            let (a, b) = (earlier.some_us[i]?, self.some_us[i]?);
            (seconds > 0.0).then(|| (b.saturating_sub(a) as f64 / 1e6 / seconds).clamp(0.0, 1.0))
        };
        let [cpu, io, memory] = [share(0), share(1), share(2)];
        (cpu.is_some() || io.is_some() || memory.is_some()).then_some(HostPressure {
            cpu,
            io,
            memory,
            seconds,
        })
    }
}

/// The `total=` of a pressure file's `some` line.
fn some_total(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_some_line_s_total_is_read() {
        let t = "some avg10=43.32 avg60=52.26 avg300=67.53 total=1565043714\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(some_total(t), Some(1_565_043_714));
        assert_eq!(some_total("full avg10=0.00 total=5\n"), None);
        assert_eq!(some_total(""), None);
    }

    #[test]
    fn a_window_s_pressure_is_its_stalled_share() {
        let dir = tempfile::tempdir().unwrap();
        let write = |cpu: u64, io: u64| {
            std::fs::write(
                dir.path().join("cpu"),
                format!("some avg10=0 total={cpu}\n"),
            )
            .unwrap();
            std::fs::write(dir.path().join("io"), format!("some avg10=0 total={io}\n")).unwrap();
        };
        write(1_000_000, 0);
        let a = Snapshot::read(dir.path());
        write(1_500_000, 100_000);
        let mut b = Snapshot::read(dir.path());
        // The window as if it lasted 2 s: 0.5 s of CPU stall, 0.1 s of I/O stall.
        b.at = a.at + std::time::Duration::from_secs(2);
        let p = b.since(&a).unwrap();
        assert_eq!((p.cpu, p.io, p.memory), (Some(0.25), Some(0.05), None));
        assert_eq!(p.brief(), "cpu 25% io 5%");
        assert_eq!(p.worst(), 0.25);
        // Nothing read: no pressure at all.
        let none = Snapshot::read(&dir.path().join("missing"));
        assert_eq!(none.since(&none), None);
    }

    #[test]
    fn this_machine_reports_pressure() {
        // Debian 12's kernels have PSI on; the tests' machines run them.
        let a = Snapshot::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let p = Snapshot::now()
            .since(&a)
            .expect("/proc/pressure is readable here");
        assert!(p.cpu.is_some() && p.io.is_some(), "{p:?}");
    }
}
