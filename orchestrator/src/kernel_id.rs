//! A built kernel's identity: a hash of its `vmlinux` and its modules with what only names the
//! build left out, the release string that carries the commit's id (`-fb<id>`) and the GNU
//! build ids that hash it. Builds are reproducible (the build number and timestamp pinned,
//! issue 32), so two commits with one identity built one kernel: a hunt boots one of them and
//! counts its boots for both (issue 35).
//!
//! Conservative the other way from pruning: anything else that differs (a config that embeds
//! its `.config` with the local version in it, a big-endian note this does not recognise)
//! makes two identities differ, and the commits are booted each on their own.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The identity's file name, next to `bzImage` in a cached kernel's directory.
pub const KERNEL_ID_FILE: &str = "kernel-id";

/// The header of a GNU build-id note as a little-endian ELF file has it: name size 4,
/// descriptor size 20, type 3 (`NT_GNU_BUILD_ID`), "GNU\0". The 20 bytes after it hash the
/// whole image, the release string included, so they differ whenever the name does.
const BUILD_ID_NOTE: [u8; 16] = [4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];
const BUILD_ID_LEN: usize = 20;

/// The identity of the kernel built in a build directory: its `vmlinux` and, when the config
/// has modules, the packed modules (`modules.tar`, paths and contents), with every
/// occurrence of `name` (the build's local version) and every build id left out.
pub fn of_build(vmlinux: &Path, modules_tar: Option<&Path>, name: &str) -> std::io::Result<String> {
    let mut h = Sha256::new();
    h.update(b"firstbad kernel id v1\0vmlinux\0");
    hash_without(&mut h, &std::fs::read(vmlinux)?, name.as_bytes());
    if let Some(tar) = modules_tar {
        h.update(b"\0modules\0");
        let mut archive = tar::Archive::new(std::io::BufReader::new(std::fs::File::open(tar)?));
        let mut content = Vec::new();
        for entry in archive.entries()? {
            let mut entry = entry?;
            h.update(b"\0entry\0");
            h.update([entry.header().entry_type().as_byte()]);
            hash_without(&mut h, &entry.path_bytes(), name.as_bytes());
            if let Some(link) = entry.link_name_bytes() {
                h.update(b"\0link\0");
                hash_without(&mut h, &link, name.as_bytes());
            }
            content.clear();
            entry.read_to_end(&mut content)?;
            h.update(b"\0content\0");
            hash_without(&mut h, &content, name.as_bytes());
        }
    }
    Ok(hex(&h.finalize()))
}

/// Feeds `bytes` to `h` with the holes left out: every occurrence of `name` and every build
/// id. Where each hole was (offset, length) is hashed instead of its bytes, so that two files
/// agree only when their holes sit in the same places and everything else is equal: a file
/// that had other bytes where the other has its name does not come out the same.
fn hash_without(h: &mut Sha256, bytes: &[u8], name: &[u8]) {
    let mut holes: Vec<(usize, usize)> = Vec::new();
    if !name.is_empty() {
        holes.extend(memchr::memmem::find_iter(bytes, name).map(|at| (at, name.len())));
    }
    // A 16-byte note header met by chance in other data would leave 20 bytes of that data
    // out; the header is four small integers and "GNU\0", and both sides skip the same place.
    holes.extend(
        memchr::memmem::find_iter(bytes, &BUILD_ID_NOTE)
            .map(|at| (at + BUILD_ID_NOTE.len(), BUILD_ID_LEN)),
    );
    holes.sort_unstable();
    h.update((bytes.len() as u64).to_le_bytes());
    let mut pos = 0;
    for (at, len) in holes {
        let start = at.max(pos).min(bytes.len());
        let end = (at + len).min(bytes.len());
        h.update(&bytes[pos..start]);
        h.update(b"\0hole\0");
        h.update((at as u64).to_le_bytes());
        h.update((len as u64).to_le_bytes());
        pos = pos.max(end);
    }
    h.update(&bytes[pos..]);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a cached kernel's identity file, if it has one.
pub fn read(path: &Path) -> Option<String> {
    let id = std::fs::read_to_string(path).ok()?;
    let id = id.trim();
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(bytes: &[u8], name: &str) -> String {
        let mut h = Sha256::new();
        hash_without(&mut h, bytes, name.as_bytes());
        hex(&h.finalize())
    }

    fn note(desc: u8) -> Vec<u8> {
        let mut v = BUILD_ID_NOTE.to_vec();
        v.extend([desc; BUILD_ID_LEN]);
        v
    }

    #[test]
    fn two_builds_that_differ_only_in_their_names_and_build_ids_are_one_kernel() {
        let a = [
            &b"Linux version 6.1.0-fbaaaa (gcc) "[..],
            &note(1),
            b" tail -fbaaaa",
        ]
        .concat();
        let b = [
            &b"Linux version 6.1.0-fbbbbb (gcc) "[..],
            &note(2),
            b" tail -fbbbbb",
        ]
        .concat();
        assert_eq!(id(&a, "-fbaaaa"), id(&b, "-fbbbbb"));
    }

    #[test]
    fn any_other_byte_or_a_name_in_another_place_is_another_kernel() {
        let base = id(b"code 1 -fbaaaa end", "-fbaaaa");
        assert_ne!(base, id(b"code 2 -fbbbbb end", "-fbbbbb"));
        assert_ne!(base, id(b"code 1  -fbbbbb end", "-fbbbbb"));
        // The other build has, where this one's name is, bytes of its own.
        assert_ne!(id(b"a -fbaaaa b", "-fbaaaa"), id(b"a XXXXXXX b", "-fbbbbb"));
        // A changed build id is left out, a changed byte beside it is not.
        let (x, y) = (
            [&b"x"[..], &note(1), b"1"].concat(),
            [&b"x"[..], &note(2), b"2"].concat(),
        );
        assert_ne!(id(&x, "-fb"), id(&y, "-fb"));
    }

    #[test]
    fn a_name_inside_a_build_id_or_at_the_end_hashes_without_a_panic() {
        let mut v = note(7);
        v.extend(b"-fbaaaa");
        let at = BUILD_ID_NOTE.len() + 3;
        v[at..at + 4].copy_from_slice(b"-fba");
        let _ = id(&v, "-fba");
        let _ = id(b"-fba", "-fba");
        let _ = id(b"", "-fba");
    }
}
