//! Per-run bounds on what one request may take from the test host: memory, OS threads and open
//! files, checked when the run is requested (issue 19). Bytes written to scratch are checked
//! against its free space separately (`workloads::bytes_needed`).
//!
//! Before, one request of about 150 bytes (`fsync-latency` with 64 writers of 64 MiB blocks)
//! took the agent from 10 MB to 1.8 GB within 3 s, and a `threads` run with 1-byte blocks grew
//! by 20 MB a second, since every request's latency is kept: about 4 GiB per request passed
//! validation, more than a test VM has.

use super::{fio_job, MAX_SERIES_SAMPLES};
use firstbad_wire::Workload;

/// Memory one latency sample costs while a run summarises it: the sample, the flattened copy
/// of every thread's samples and the sorted copy the percentiles are read from (8 bytes each).
const SAMPLE_BYTES: u64 = 24;
/// One run may use this share of the host's memory (1/4): the kernel under test needs the rest,
/// and its page cache and dirty pages are what most workloads measure.
const MEMORY_DIVISOR: u64 = 4;
/// The memory budget stops growing here on big hosts: no workload we know needs more.
const MAX_MEMORY_BYTES: u64 = 2 << 30;
/// Buffer `sequential::prepare` uses to lay out files before they are read.
const PREPARE_BYTES: u64 = 1 << 20;
/// Memory of fio's main process: measured at 30 MB resident with fio 3.33 (its shared job
/// state); rounded up.
const FIO_MAIN_BYTES: u64 = 32 << 20;
/// Memory of each fio job process beyond its buffers: measured at 6.9 MB resident; rounded up.
const FIO_PROCESS_BYTES: u64 = 8 << 20;
/// Most OS threads or fio processes one run may start: tiobench's top end.
pub const MAX_RUN_THREADS: u64 = 256;
/// Most files one run may hold open at once: well under the descriptors the agent keeps for
/// workloads (`connections::RESERVED_FDS` is 320), with fio's own few per process on top.
pub const MAX_RUN_FILES: u64 = 256;

/// How much of the host one run may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes of memory one run's buffers and samples may take.
    pub memory_bytes: u64,
    /// The host's memory the budget was derived from (`MemTotal`), for messages.
    pub host_memory_bytes: u64,
}

impl Budget {
    /// The budget on a host with `host_memory_bytes` of RAM.
    pub fn for_host_memory(host_memory_bytes: u64) -> Budget {
        Budget {
            memory_bytes: (host_memory_bytes / MEMORY_DIVISOR).min(MAX_MEMORY_BYTES),
            host_memory_bytes,
        }
    }

    /// This budget with `memory_bytes` set by the operator (`--run-memory-mb`).
    pub fn with_memory(self, memory_bytes: u64) -> Budget {
        Budget {
            memory_bytes,
            ..self
        }
    }

    /// The budget on this host, from `MemTotal` in `/proc/meminfo` (1 GiB if unreadable).
    pub fn of_this_host() -> Budget {
        let total_kb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(1 << 20);
        Budget::for_host_memory(total_kb.saturating_mul(1024))
    }
}

impl Default for Budget {
    /// The budget of a 1 GiB host, the demo guest's size.
    fn default() -> Self {
        Budget::for_host_memory(1 << 30)
    }
}

/// One thing a run would take, and how it was computed from the request's fields.
struct Need {
    /// The formula in the request's field names, e.g. `writers × writer_block_bytes`.
    formula: String,
    amount: u64,
    bound: u64,
    /// What is counted: `bytes of memory`, `threads`, `open files`.
    unit: &'static str,
}

/// Checks that `workload` stays within `budget` and the thread and file bounds; the error
/// names the fields, what they add up to and the bound.
pub fn check(workload: &Workload, budget: &Budget) -> Result<(), String> {
    let mem = |formula: String, amount: u64| Need {
        formula,
        amount,
        bound: budget.memory_bytes,
        unit: "bytes of memory",
    };
    let threads = |formula: &str, amount: u64| Need {
        formula: formula.to_owned(),
        amount,
        bound: MAX_RUN_THREADS,
        unit: "threads",
    };
    let files = |formula: &str, amount: u64| Need {
        formula: formula.to_owned(),
        amount,
        bound: MAX_RUN_FILES,
        unit: "open files",
    };
    let s = SAMPLE_BYTES;
    let needs = match workload {
        Workload::FsyncLatency(p) => {
            let writers = u64::from(p.writers);
            let buffers = if writers > 0 {
                writers.saturating_mul(p.writer_block_bytes.into())
            } else {
                0
            };
            vec![
                mem(
                    format!("writers × writer_block_bytes + append_bytes + {s} × fsyncs"),
                    buffers
                        .saturating_add(p.append_bytes.into())
                        .saturating_add(s.saturating_mul(p.fsyncs.into())),
                ),
                threads("writers + 1", writers + 1),
                files("writers + 1", writers + 1),
            ]
        }
        Workload::Sequential(p) => {
            let targets = (p.devices.len() as u64).max(1);
            let requests = p.bytes / u64::from(p.block_bytes.max(1));
            let samples = targets.saturating_mul(requests.min(MAX_SERIES_SAMPLES as u64));
            let what = if p.devices.is_empty() {
                "1"
            } else {
                "len(devices)"
            };
            vec![mem(
                format!(
                    "{what} × (block_bytes + {s} × min(bytes / block_bytes, \
                     {MAX_SERIES_SAMPLES})) + {PREPARE_BYTES}"
                ),
                targets
                    .saturating_mul(p.block_bytes.into())
                    .saturating_add(s.saturating_mul(samples))
                    .saturating_add(PREPARE_BYTES),
            )]
        }
        Workload::Threads(p) => {
            let n = u64::from(p.threads);
            let blocks = p.file_bytes / u64::from(p.block_bytes.max(1));
            vec![
                mem(
                    format!(
                        "threads × (block_bytes + {s} × file_bytes / block_bytes) + \
                         {PREPARE_BYTES}"
                    ),
                    n.saturating_mul(
                        u64::from(p.block_bytes).saturating_add(s.saturating_mul(blocks)),
                    )
                    .saturating_add(PREPARE_BYTES),
                ),
                threads("threads", n),
                files("threads", n),
            ]
        }
        Workload::Fio(p) => {
            // validate() has parsed the job already; a job that does not parse has no shape.
            let jobs = fio_job::parse(&p.job).map(|j| j.jobs()).unwrap_or_default();
            let sum = |f: &dyn Fn(&fio_job::JobShape) -> u64| {
                jobs.iter().fold(0u64, |acc, j| acc.saturating_add(f(j)))
            };
            vec![
                mem(
                    format!(
                        "{FIO_MAIN_BYTES} + the sum over jobs of numjobs × ({FIO_PROCESS_BYTES} \
                         + iodepth × bs) (bs: the largest of bs, bsrange, bssplit)"
                    ),
                    sum(&|j| {
                        j.numjobs.saturating_mul(
                            j.iodepth
                                .saturating_mul(j.max_bs)
                                .saturating_add(FIO_PROCESS_BYTES),
                        )
                    })
                    .saturating_add(FIO_MAIN_BYTES),
                ),
                threads("the sum over jobs of numjobs", sum(&|j| j.numjobs)),
                files(
                    "the sum over jobs of numjobs × nrfiles",
                    sum(&|j| j.numjobs.saturating_mul(j.nrfiles)),
                ),
            ]
        }
        // A user's script runs only with --allow-command, and takes what it takes.
        Workload::Command(_) => Vec::new(),
    };
    // Counts first: "numjobs = 4096 threads" says more than the memory they would take.
    let (memory, counts): (Vec<Need>, Vec<Need>) =
        needs.into_iter().partition(|n| n.unit == "bytes of memory");
    for need in counts.into_iter().chain(memory) {
        if need.amount > need.bound {
            let host = if need.unit == "bytes of memory" {
                format!(
                    " (this host has {} MiB; --run-memory-mb sets the bound)",
                    budget.host_memory_bytes >> 20
                )
            } else {
                String::new()
            };
            return Err(format!(
                "{}: {} = {} {}, more than the {} one run may use{host}",
                workload.kind(),
                need.formula,
                need.amount,
                need.unit,
                need.bound,
            ));
        }
    }
    Ok(())
}

/// Bytes a fio job without a scratch device writes to the scratch directory at most: every
/// job's files (`numjobs × size`); sizes given as percentages count as 0, since fio then sizes
/// the file from what is there.
pub fn fio_bytes_needed(job: &str) -> u64 {
    fio_job::parse(job)
        .map(|j| {
            j.jobs().iter().fold(0u64, |acc, j| {
                acc.saturating_add(j.numjobs.saturating_mul(j.size.unwrap_or(0)))
            })
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use firstbad_wire::{FsyncLatency, IoOp, IoPattern, Threads};

    // issue 19: one ~150-byte request took 1.8 GB of the agent within 3 s.
    #[test]
    fn sixty_four_writers_of_64_mib_blocks_are_refused_on_a_small_host() {
        let w = Workload::FsyncLatency(FsyncLatency {
            writers: 64,
            writer_bytes: 1,
            writer_block_bytes: 64 << 20,
            append_bytes: 64 << 20,
            fsyncs: 100,
            interval_ms: 60_000,
            warmup_ms: 0,
            writer_direct: false,
        });
        let e = check(&w, &Budget::for_host_memory(1 << 30)).unwrap_err();
        assert!(
            e.contains("writers × writer_block_bytes") && e.contains("268435456"),
            "{e}"
        );
        assert!(e.contains("1024 MiB"), "{e}");
    }

    // issue 19: every request's latency is kept, so tiny blocks are memory too.
    #[test]
    fn threads_with_tiny_blocks_are_refused_by_their_samples() {
        let w = Workload::Threads(Threads {
            threads: 256,
            op: IoOp::Write,
            pattern: IoPattern::Random,
            file_bytes: 1 << 20,
            block_bytes: 1,
            direct: false,
            drop_caches: false,
        });
        let e = check(&w, &Budget::for_host_memory(1 << 30)).unwrap_err();
        assert!(e.contains("file_bytes / block_bytes"), "{e}");
    }

    #[test]
    fn fio_jobs_are_bounded_by_processes_files_and_buffers() {
        let fio = |job: &str| {
            Workload::Fio(firstbad_wire::Fio {
                job: job.to_owned(),
                device: None,
                timeout_s: 60,
            })
        };
        let b = Budget::for_host_memory(1 << 30);
        check(&fio("[w]\nrw=write\nbs=1m\nnumjobs=3\nsize=512m\n"), &b).expect("3 writers");
        let e = check(&fio("[w]\nnumjobs=1000\n"), &b).unwrap_err();
        assert!(e.contains("numjobs") && e.contains("threads"), "{e}");
        let e = check(&fio("[w]\nnumjobs=16\nnrfiles=100\n"), &b).unwrap_err();
        assert!(e.contains("nrfiles"), "{e}");
        let e = check(&fio("[w]\niodepth=1024\nbs=64m\n"), &b).unwrap_err();
        assert!(e.contains("iodepth × bs"), "{e}");
        assert_eq!(
            fio_bytes_needed("[global]\nsize=4m\n[a]\nnumjobs=2\n[b]\nsize=50%\n"),
            8 << 20
        );
    }

    #[test]
    fn the_budget_is_a_quarter_of_memory_up_to_a_ceiling() {
        assert_eq!(Budget::for_host_memory(1 << 30).memory_bytes, 256 << 20);
        assert_eq!(Budget::for_host_memory(64 << 30).memory_bytes, 2 << 30);
        assert!(Budget::of_this_host().host_memory_bytes > 0);
    }
}
