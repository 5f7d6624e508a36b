//! Per-run bounds on what one request may take from the test host: memory, OS threads and open
//! files, checked when the run is requested (issue 19). Bytes written to scratch are checked
//! against its free space separately (`workloads::bytes_needed`); a fio job whose bytes cannot
//! be bounded is refused here (issue 32, finding 6).
//!
//! Before, one request of about 150 bytes (`fsync-latency` with 64 writers of 64 MiB blocks)
//! took the agent from 10 MB to 1.8 GB within 3 s, and a `threads` run with 1-byte blocks grew
//! by 20 MB a second, since every request's latency is kept: about 4 GiB per request passed
//! validation, more than a test VM has.

use super::fio_job::{self, ByteCount, JobShape};
use super::MAX_SERIES_SAMPLES;
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
            if p.device.is_none() {
                fio_scratch_bytes(&p.job)?;
            }
            let sum = |f: &dyn Fn(&JobShape) -> u64| {
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

/// How the bytes a fio job writes to scratch are counted, in its options' names, for messages.
pub const FIO_SCRATCH_FORMULA: &str = "the sum over jobs of numjobs × (nrfiles × offset + size) \
     + nrfiles × offset_increment × numjobs × (numjobs − 1) / 2, with nrfiles × filesize (its \
     high end) in place of size when filesize is given";

/// Bytes a fio job without a scratch device writes to the scratch directory at most
/// ([`fio_scratch_bytes`]); `u64::MAX`, which no scratch holds, for a job it cannot bound.
pub fn fio_bytes_needed(job: &str) -> u64 {
    fio_scratch_bytes(job).unwrap_or(u64::MAX)
}

/// Bytes a fio job without a scratch device writes to the scratch directory at most, the sum
/// of [`fio_job_scratch_bytes`] over its jobs; the error names the job section, the option and
/// the fix.
pub fn fio_scratch_bytes(job: &str) -> Result<u64, String> {
    let job = fio_job::parse(job).map_err(|e| e.to_string())?;
    job.jobs().iter().try_fold(0u64, |acc, j| {
        Ok(acc.saturating_add(fio_job_scratch_bytes(j)?))
    })
}

/// Bytes one job section writes to the scratch directory at most ([`FIO_SCRATCH_FORMULA`]),
/// or why they cannot be bounded.
///
/// Each of the `numjobs` processes has `nrfiles` files of its own (`name.process.file`), all
/// new: the agent runs every job in a fresh directory. Process k's files start at
/// offset + k × offset_increment, and fio writes from there to that offset + the file's share
/// of `size`: fio 3.33's `setup_files` (`filesetup.c`) sets each file's end to
/// `file_offset + io_size` and allocates it from byte 0 (`fallocate_file`), so the bytes
/// before the offset take space too (measured: `size=64k offset=1m` leaves a file of
/// 1 MiB + 64 KiB). `io_u.c` issues no I/O past that end, so `loops`, `io_size` and
/// `time_based` stay within it. With `filesize`, fio ends each file at the size it draws (at
/// most the range's high end) and refuses an offset past it; the offset is counted on top all
/// the same, so such a job is over-counted by its offsets rather than ever under-counted.
///
/// Percentages are shares of files that exist before the job, and there are none: fio refuses
/// `size=50%` alone ("you need to specify size="), and takes an offset's percentage of a size
/// it makes up (size / nrfiles, or 2^64 − 1 when only `filesize` is given), so those are
/// refused. `filesize` is never a percentage ([`fio_job::parse`] refuses it), and
/// `fill_device` / `fill_fs`, which write until ENOSPC, are not allowed at all.
pub fn fio_job_scratch_bytes(j: &JobShape) -> Result<u64, String> {
    let fix = "or run the job on a scratch device (the workload's device, an agent started \
               with --scratch-device), where a share is one of the device";
    let unbounded = |option: &str, value: &ByteCount, why: &str, instead: &str| {
        Err(format!(
            "fio: job [{}]: {option}={value} {why}, so the agent cannot bound the bytes it \
             writes to scratch: give {instead}, {fix}",
            j.name
        ))
    };
    let bytes = |option: &str, value: &Option<ByteCount>| match value {
        None => Ok(0),
        Some(ByteCount::Bytes(n)) => Ok(*n),
        Some(share @ ByteCount::Percent(_)) => unbounded(
            option,
            share,
            "is a share of a file that does not exist before the run (fio takes it of a size \
             it makes up)",
            &format!("{option} in bytes ({option}=1g)"),
        ),
    };
    let offset = bytes("offset", &j.offset)?;
    // With one process the increment is multiplied by 0 (fio: `subjob_number * increment`).
    let increment = if j.numjobs > 1 {
        bytes("offset_increment", &j.offset_increment)?
    } else {
        0
    };
    // One process's files together, past their offsets.
    let files = match (j.filesize_max, &j.size) {
        (Some(filesize), _) => j.nrfiles.saturating_mul(filesize),
        (None, Some(ByteCount::Bytes(size))) => *size,
        (None, Some(share @ ByteCount::Percent(_))) => {
            return unbounded(
                "size",
                share,
                "is a share of files that do not exist before the run",
                "size in bytes (size=64m) or each file's size (filesize=64m)",
            )
        }
        // fio stops with "you need to specify size=" before it writes.
        (None, None) => 0,
    };
    let n = j.numjobs;
    // Σ over k < n of k = n × (n − 1) / 2; n is at most MAX_RUN_THREADS here, but saturate.
    let steps = n.saturating_mul(n.saturating_sub(1)) / 2;
    Ok(
        n.saturating_mul(j.nrfiles.saturating_mul(offset).saturating_add(files))
            .saturating_add(j.nrfiles.saturating_mul(increment).saturating_mul(steps)),
    )
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
            fio_bytes_needed("[global]\nsize=4m\n[a]\nnumjobs=2\n[b]\nsize=1m\n"),
            9 << 20
        );
        assert_eq!(fio_bytes_needed("[a]\nsize=50%\n"), u64::MAX);
    }

    // issue 32, finding 6: `size` was counted where `filesize` overrides it, a file's bytes
    // before its `offset` were not counted, and neither were the clones' `offset_increment`s:
    // such jobs passed the scratch-space check and filled scratch (ENOSPC).
    #[test]
    fn fio_bytes_count_every_file_of_every_clone_up_to_its_end() {
        const M: u64 = 1 << 20;
        const G: u64 = 1 << 30;
        let wrong: Vec<(&str, u64, u64)> = [
            ("[w]\nfilesize=64m\nnrfiles=100\n", 100 * 64 * M),
            // filesize overrides size (fio's HOWTO: size is then only io_size's default).
            ("[w]\nsize=64m\nfilesize=64m\nnrfiles=100\n", 100 * 64 * M),
            (
                "[global]\nfilesize=64m\n[w]\nsize=1m\nnrfiles=100\nnumjobs=2\n",
                2 * 100 * 64 * M,
            ),
            // fio writes from offset to offset + size: the file ends 100 GiB in.
            ("[w]\nsize=64m\noffset=100g\n", 100 * G + 64 * M),
            ("[w]\nsize=64m\nnrfiles=4\noffset=1g\n", 4 * G + 64 * M),
            // Clone k starts at offset + k × offset_increment: 1, 2, 3 and 4 GiB in.
            (
                "[w]\nsize=64m\noffset=1g\noffset_increment=1g\nnumjobs=4\n",
                10 * G + 4 * 64 * M,
            ),
            // A range's files are drawn up to its upper end.
            ("[w]\nfilesize=1g-2g\nnrfiles=3\n", 3 * 2 * G),
            ("[w]\nfilesize=1g:2g\noffset=1m\n", 2 * G + M),
        ]
        .into_iter()
        .map(|(job, bytes)| (job, fio_bytes_needed(job), bytes))
        .filter(|(_, counted, bytes)| counted != bytes)
        .collect();
        assert!(wrong.is_empty(), "(job, counted, fio writes): {wrong:?}");
    }

    // issue 32, finding 6: what the agent cannot bound is refused, naming the job, the option
    // and the fix.
    #[test]
    fn fio_sizes_the_agent_cannot_bound_in_scratch_are_refused() {
        let fio = |job: &str, device: Option<&str>| {
            Workload::Fio(firstbad_wire::Fio {
                job: job.to_owned(),
                device: device.map(str::to_owned),
                timeout_s: 60,
            })
        };
        let b = Budget::for_host_memory(1 << 30);
        for (job, named) in [
            ("[w]\nrw=write\nsize=50%\n", "size=50%"),
            ("[w]\nrw=write\nsize=64m\noffset=10%\n", "offset=10%"),
            (
                "[w]\nrw=write\nsize=64m\noffset_increment=10%\nnumjobs=2\n",
                "offset_increment=10%",
            ),
        ] {
            let e = check(&fio(job, None), &b).expect_err(job);
            assert!(e.contains("[w]") && e.contains(named), "{job:?}: {e}");
            assert!(e.contains("scratch device"), "{job:?}: no fix in {e}");
        }
        // A share of a scratch device is bounded by the device; filesize bounds a share of it.
        check(
            &fio("[w]\nrw=write\nsize=50%\noffset=10%\n", Some("/dev/vdb")),
            &b,
        )
        .expect("a share of a device");
        check(&fio("[w]\nrw=write\nfilesize=64m\nsize=50%\n", None), &b)
            .expect("a share of a 64 MiB file");
        check(
            &fio("[w]\nrw=write\nsize=64m\noffset_increment=10%\n", None),
            &b,
        )
        .expect("one clone: the increment is never added");
    }

    #[test]
    fn the_budget_is_a_quarter_of_memory_up_to_a_ceiling() {
        assert_eq!(Budget::for_host_memory(1 << 30).memory_bytes, 256 << 20);
        assert_eq!(Budget::for_host_memory(64 << 30).memory_bytes, 2 << 30);
        assert!(Budget::of_this_host().host_memory_bytes > 0);
    }
}
