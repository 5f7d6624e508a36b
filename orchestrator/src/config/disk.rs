//! `[[hosts]] kind = "qemu"`'s scratch disk (issue 33): what stands between the guest's
//! writeback and the host. The reports firstbad was made from (kernel bug 12309's dirty limits
//! and CFQ queue depth, md RAID0's readahead) are tuning changes whose effect needs a disk
//! slower than memory; a scratch file in the host's page cache absorbs writeback at memory
//! speed, and on it the dirty-limits cut *helped* fsync's tail. A preset names a disk of the
//! reports; each field may be set over it.

use super::bounds::{self, host, int, Bound};
use super::raw::RawHost;
use super::read::snippet;
use super::validate::Validator;
use crate::error::ConfigError;

/// How the qemu host's scratch disk behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskModel {
    /// The preset the fields start from.
    pub preset: &'static str,
    /// `cache=none`: the image is opened with O_DIRECT, so the host's page cache does not
    /// absorb the guest's writes; else `cache=writeback`.
    pub direct: bool,
    /// Throughput cap in MB/s (qemu's `throttling.bps-total`, 10⁶ bytes); 0: none.
    pub mb_s: u32,
    /// I/O operations per second cap (`throttling.iops-total`); 0: none.
    pub iops: u32,
    /// virtio-blk queues (`num-queues`); 0: qemu's default (one per vCPU).
    pub queues: u32,
    /// virtio-blk queue depth (`queue-size`); 0: qemu's default (256).
    pub queue_size: u32,
}

/// The presets: name, direct, MB/s, IOPS, queues, queue depth.
const PRESETS: &[(&str, bool, u32, u32, u32, u32)] = &[
    // Today's: a file in the host's page cache, qemu's defaults. Writeback costs almost
    // nothing; the demo's msleep(50) in fsync shows on it, tuning changes often do not.
    ("page-cache", false, 0, 0, 0, 0),
    // A 7200 rpm SATA disk of 2009 (bug 12309's era): ~90 MB/s sequential, ~120 random IOPS
    // (8 ms a seek and half a turn), NCQ's 32 commands, one queue.
    ("sata-2009", true, 90, 120, 1, 32),
    // A PCIe 3 NVMe SSD of 2019: ~1.5 GB/s written sustained, ~100k IOPS at depth, a queue per
    // CPU (up to 4 here) of 1024. Under TCG the guest's own CPU is the limit long before.
    ("nvme-2019", true, 1500, 100_000, 4, 1024),
];

impl DiskModel {
    /// Today's disk, the default: a file in the host's page cache.
    pub fn page_cache() -> DiskModel {
        DiskModel::preset("page-cache").expect("a preset")
    }

    fn preset(name: &str) -> Option<DiskModel> {
        PRESETS.iter().find(|p| p.0 == name).map(
            |&(preset, direct, mb_s, iops, queues, queue_size)| DiskModel {
                preset,
                direct,
                mb_s,
                iops,
                queues,
                queue_size,
            },
        )
    }

    /// Whether this is today's disk, whose qemu arguments are the ones every earlier
    /// journal was measured with.
    pub fn is_page_cache(&self) -> bool {
        *self == DiskModel::page_cache()
    }

    /// The model in one line, for the journal's meaning and the reports:
    /// `sata-2009: cache=none, 90 MB/s, 120 IOPS, 1 queue(s) of 32`.
    pub fn describe(&self) -> String {
        let cap = |x: u32, unit: &str| {
            if x == 0 {
                format!("no {unit} cap")
            } else {
                format!("{x} {unit}")
            }
        };
        let queues = match (self.queues, self.queue_size) {
            (0, 0) => "qemu's queues".to_owned(),
            (q, d) => format!(
                "{} queue(s) of {}",
                if q == 0 {
                    "qemu's".into()
                } else {
                    q.to_string()
                },
                if d == 0 {
                    "qemu's".into()
                } else {
                    d.to_string()
                }
            ),
        };
        format!(
            "{}: cache={}, {}, {}, {queues}",
            self.preset,
            if self.direct { "none" } else { "writeback" },
            cap(self.mb_s, "MB/s"),
            cap(self.iops, "IOPS"),
        )
    }
}

/// `[[hosts]] disk_mb_s` (qemu).
pub const QEMU_DISK_MB_S: Bound = host(
    "qemu",
    Bound {
        default: bounds::Default::Text("the disk preset's"),
        ..int(
            "hosts[].disk_mb_s",
            0,
            100_000,
            0,
            "MB/s the scratch disk moves at most (qemu throttling); 0: no cap; 100 GB/s is past any device",
        )
    },
);
/// `[[hosts]] disk_iops` (qemu).
pub const QEMU_DISK_IOPS: Bound = host(
    "qemu",
    Bound {
        default: bounds::Default::Text("the disk preset's"),
        ..int(
            "hosts[].disk_iops",
            0,
            100_000_000,
            0,
            "I/O operations a second at most (qemu throttling); 0: no cap",
        )
    },
);
/// `[[hosts]] disk_queues` (qemu).
pub const QEMU_DISK_QUEUES: Bound = host(
    "qemu",
    Bound {
        default: bounds::Default::Text("the disk preset's"),
        ..int(
            "hosts[].disk_queues",
            0,
            64,
            0,
            "virtio-blk queues; 0: qemu's (one per vCPU); past 64 no guest here has the CPUs",
        )
    },
);
/// `[[hosts]] disk_queue_size` (qemu).
pub const QEMU_DISK_QUEUE_SIZE: Bound = host(
    "qemu",
    Bound {
        default: bounds::Default::Text("the disk preset's"),
        ..int(
            "hosts[].disk_queue_size",
            0,
            1024,
            0,
            "virtio-blk queue depth, a power of two; 0: qemu's (256); virtio's rings stop at 1024",
        )
    },
);
/// The `i`th host's disk model: its preset (`disk`), then each field set over it.
pub(super) fn disk(v: &Validator, i: usize, h: &RawHost) -> Result<DiskModel, ConfigError> {
    let at = |f: &str| format!("hosts[{i}].{f}");
    let name = h.disk.as_deref().unwrap_or("page-cache");
    let mut d = DiskModel::preset(name).ok_or_else(|| {
        v.field(
            &at("disk"),
            format!(
                "{} is not a disk preset: use one of {}",
                snippet(name),
                PRESETS
                    .iter()
                    .map(|p| format!("\"{}\"", p.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    if let Some(cache) = h.disk_cache.as_deref() {
        d.direct = match cache {
            "none" => true,
            "writeback" => false,
            other => {
                return Err(v.field(
                    &at("disk_cache"),
                    format!(
                        "{} is not \"none\" (O_DIRECT: the host's page cache keeps nothing) or \
                         \"writeback\" (the host's page cache absorbs the guest's writes)",
                        snippet(other)
                    ),
                ))
            }
        };
    }
    let field = |b: &Bound, raw: Option<i64>, now: u32| -> Result<u32, ConfigError> {
        v.int(b, Some(i), Some(raw.unwrap_or(i64::from(now))))
    };
    d.mb_s = field(&QEMU_DISK_MB_S, h.disk_mb_s, d.mb_s)?;
    d.iops = field(&QEMU_DISK_IOPS, h.disk_iops, d.iops)?;
    d.queues = field(&QEMU_DISK_QUEUES, h.disk_queues, d.queues)?;
    d.queue_size = field(&QEMU_DISK_QUEUE_SIZE, h.disk_queue_size, d.queue_size)?;
    // virtio's rings are a power of two; qemu refuses other sizes at start, far from here.
    if d.queue_size != 0 && !d.queue_size.is_power_of_two() {
        return Err(v.field(
            &at("disk_queue_size"),
            format!(
                "{} is not a power of two: virtio's queues are (e.g. 32, 64, 256)",
                d.queue_size
            ),
        ));
    }
    Ok(d)
}

/// qemu's arguments for a scratch disk of model `d` at `path`: `-drive` and, past today's
/// disk, the `-device` that carries the queues.
pub fn qemu_args(d: &DiskModel, path: &std::path::Path) -> Vec<String> {
    if d.is_page_cache() {
        // Word for word what every journal before the disk model was measured with.
        return vec![
            "-drive".into(),
            format!(
                "file={},format=raw,if=virtio,cache=writeback",
                path.display()
            ),
        ];
    }
    let mut drive = format!(
        "file={},format=raw,if=none,id=scratch,cache={}",
        path.display(),
        if d.direct { "none" } else { "writeback" }
    );
    if d.mb_s > 0 {
        drive += &format!(",throttling.bps-total={}", u64::from(d.mb_s) * 1_000_000);
    }
    if d.iops > 0 {
        drive += &format!(",throttling.iops-total={}", d.iops);
    }
    let mut device = "virtio-blk-pci,drive=scratch".to_owned();
    if d.queues > 0 {
        device += &format!(",num-queues={}", d.queues);
    }
    if d.queue_size > 0 {
        device += &format!(",queue-size={}", d.queue_size);
    }
    vec!["-drive".into(), drive, "-device".into(), device]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_s_disk_keeps_its_arguments_and_a_preset_throttles_and_bypasses_the_page_cache() {
        let p = std::path::Path::new("/w/scratch.img");
        assert_eq!(
            qemu_args(&DiskModel::page_cache(), p),
            [
                "-drive",
                "file=/w/scratch.img,format=raw,if=virtio,cache=writeback"
            ]
        );
        let sata = DiskModel::preset("sata-2009").unwrap();
        assert_eq!(
            qemu_args(&sata, p),
            [
                "-drive",
                "file=/w/scratch.img,format=raw,if=none,id=scratch,cache=none,\
                 throttling.bps-total=90000000,throttling.iops-total=120",
                "-device",
                "virtio-blk-pci,drive=scratch,num-queues=1,queue-size=32"
            ]
        );
        assert_eq!(
            sata.describe(),
            "sata-2009: cache=none, 90 MB/s, 120 IOPS, 1 queue(s) of 32"
        );
    }
}
