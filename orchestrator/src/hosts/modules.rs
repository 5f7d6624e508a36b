//! The kernel modules a qemu guest needs, taken from a prebuilt kernel's own modules tree.
//!
//! firstbad's own kernels have every driver the guest uses built in
//! (configs/kernel/qemu-x86_64.config). A distribution kernel has them as modules: Debian's
//! cloud kernels build virtio-pci (6.1), virtio-blk, virtio-net and pvpanic-pci as modules,
//! ext4 and the block layer in. The qemu host puts the modules [`GUEST_MODULES`] names, with
//! their dependencies, into the initramfs, uncompressed, and lists them in load order in
//! `/etc/firstbad/modules`, which the init loads with busybox's `insmod` before it looks for
//! the network and the scratch disk.
//!
//! Dependencies come from each module's own `.modinfo` section (`depends=`), which is what
//! depmod reads to write `modules.dep`: a package carries no `modules.dep` (depmod runs in
//! its postinst, which `dpkg-deb -x` does not run). A module that is built in
//! (`modules.builtin`) or not there at all is left out.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What the guest needs for what the qemu command line gives it ([`super::qemu`]), in the
/// order the init loads them: the virtio PCI transport, the scratch disk (virtio-blk), the
/// agent's network (virtio-net), the scratch file system with the checksum it uses, and the
/// panic device that makes qemu exit on a panic. Each one's dependencies load before it.
pub const GUEST_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "virtio_net",
    "crc32c_generic",
    "ext4",
    "pvpanic_pci",
];

/// One module for the initramfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its name (`virtio_blk`).
    pub name: String,
    /// The uncompressed `.ko`.
    pub bytes: Vec<u8>,
}

/// The modules tree of the kernel whose image is `image`: `lib/modules/<release>` beside the
/// image (a kernel directory) or beside its `boot/` (an unpacked package). `None` for a
/// kernel without one (firstbad's own builds: everything built in).
pub fn find_tree(image: &Path, release: &str) -> Option<PathBuf> {
    let dir = image.parent()?;
    let mut roots = vec![dir.to_owned()];
    if dir.file_name().is_some_and(|n| n == "boot") {
        roots.extend(dir.parent().map(Path::to_owned));
    }
    roots
        .into_iter()
        .map(|r| r.join("lib/modules").join(release))
        .find(|t| t.join("kernel").is_dir())
}

/// A module's name from its file name: `crc32c-intel.ko.xz` is `crc32c_intel`.
fn module_name(file: &str) -> Option<String> {
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))?;
    Some(stem.replace('-', "_"))
}

fn index(dir: &Path, into: &mut HashMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            index(&p, into);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(module_name) {
            into.entry(name).or_insert(p);
        }
    }
}

/// A module file's contents, uncompressed.
pub fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let raw = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let name = path.to_string_lossy();
    let mut out = Vec::new();
    if name.ends_with(".ko.xz") {
        lzma_rs::xz_decompress(&mut &raw[..], &mut out)
            .map_err(|e| format!("{shown}: xz: {e:?}"))?;
    } else if name.ends_with(".ko.zst") {
        let mut d = ruzstd::decoding::StreamingDecoder::new(&raw[..])
            .map_err(|e| format!("{shown}: zstd: {e}"))?;
        std::io::Read::read_to_end(&mut d, &mut out).map_err(|e| format!("{shown}: zstd: {e}"))?;
    } else if name.ends_with(".ko.gz") {
        return Err(format!(
            "{shown}: gzip-compressed modules are not read yet: unpack them (gunzip) in the \
             kernel directory"
        ));
    } else {
        out = raw;
    }
    Ok(out)
}

/// The strings of an ELF64 module's `.modinfo` section (`name=`, `depends=`, `license=`, ...).
pub fn modinfo(ko: &[u8]) -> Option<Vec<String>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(ko.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(ko.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(ko.get(o..o + 8)?.try_into().ok()?) as usize);
    if ko.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    let section = |i: usize| {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((u32_at(h)?, u64_at(h + 0x18)?, u64_at(h + 0x20)?))
    };
    let (_, str_off, _) = section(shstrndx)?;
    (0..shnum).find_map(|i| {
        let (name, off, size) = section(i)?;
        let n = ko.get(str_off.checked_add(name)?..)?;
        let n = &n[..n.iter().position(|&b| b == 0)?];
        (n == b".modinfo").then(|| {
            let data = ko.get(off..off.checked_add(size)?)?;
            Some(
                data.split(|&b| b == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
            )
        })?
    })
}

/// The modules of `tree` (`lib/modules/<release>`) that `wanted` needs, dependencies first,
/// each once, uncompressed. Built-in and absent modules are left out.
pub fn resolve(tree: &Path, wanted: &[&str]) -> Result<Vec<Module>, String> {
    let mut files = HashMap::new();
    for sub in ["kernel", "updates", "extra"] {
        index(&tree.join(sub), &mut files);
    }
    let builtin: HashSet<String> = std::fs::read_to_string(tree.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit('/').next().and_then(module_name))
        .collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for w in wanted {
        visit(w, &files, &builtin, &mut seen, &mut out, 0)?;
    }
    Ok(out)
}

fn visit(
    name: &str,
    files: &HashMap<String, PathBuf>,
    builtin: &HashSet<String>,
    seen: &mut HashSet<String>,
    out: &mut Vec<Module>,
    depth: usize,
) -> Result<(), String> {
    let name = name.replace('-', "_");
    // The deepest real chain is a few links; a cycle in broken modinfo must not recurse forever.
    if depth > 32 || builtin.contains(&name) || !seen.insert(name.clone()) {
        return Ok(());
    }
    let Some(path) = files.get(&name) else {
        return Ok(());
    };
    let bytes = read_module(path)?;
    let info = modinfo(&bytes)
        .ok_or_else(|| format!("{}: not a kernel module (no .modinfo)", path.display()))?;
    let depends = info
        .iter()
        .find_map(|s| s.strip_prefix("depends="))
        .unwrap_or("");
    for dep in depends.split(',').filter(|d| !d.is_empty()) {
        visit(dep, files, builtin, seen, out, depth + 1)?;
    }
    out.push(Module { name, bytes });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with one `.modinfo` section holding `info`.
    fn fake_ko(info: &str) -> Vec<u8> {
        let shstr = b"\0.modinfo\0.shstrtab\0";
        let data = info.replace(';', "\0");
        let mut b = vec![0u8; 0x40];
        b[..5].copy_from_slice(b"\x7fELF\x02");
        let data_off = b.len();
        b.extend_from_slice(data.as_bytes());
        let str_off = b.len();
        b.extend_from_slice(shstr);
        let shoff = b.len();
        let sh = |name: u32, off: usize, size: usize| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            h
        };
        let headers = [
            sh(0, 0, 0),
            sh(1, data_off, data.len()),
            sh(10, str_off, shstr.len()),
        ];
        for h in headers {
            b.extend_from_slice(&h);
        }
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        b[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        b
    }

    #[test]
    fn dependencies_load_first_and_builtins_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("lib/modules/6.1.0-47-cloud-amd64");
        let k = tree.join("kernel/drivers");
        std::fs::create_dir_all(&k).unwrap();
        let put = |n: &str, info: &str| std::fs::write(k.join(n), fake_ko(info)).unwrap();
        put(
            "virtio_blk.ko",
            "name=virtio_blk;depends=virtio,virtio_ring",
        );
        put("virtio_ring.ko", "name=virtio_ring;depends=");
        put("virtio.ko", "name=virtio;depends=virtio_ring");
        put(
            "virtio_net.ko",
            "name=virtio_net;depends=net_failover,virtio_ring,virtio",
        );
        put("net_failover.ko", "name=net_failover;depends=failover");
        put("failover.ko", "name=failover;depends=");
        std::fs::write(tree.join("modules.builtin"), "kernel/fs/ext4/ext4.ko\n").unwrap();
        let got = resolve(&tree, &["virtio_blk", "virtio_net", "ext4", "absent"]).unwrap();
        let names: Vec<&str> = got.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "virtio_ring",
                "virtio",
                "virtio_blk",
                "failover",
                "net_failover",
                "virtio_net"
            ]
        );
        let image = dir.path().join("boot/vmlinuz-6.1.0-47-cloud-amd64");
        assert_eq!(find_tree(&image, "6.1.0-47-cloud-amd64"), Some(tree));
    }
}
