//! A writer for the cpio "newc" format, the format of a Linux initramfs.
//!
//! Written here rather than shelling out to cpio(1): the archive needs root-owned files and
//! a `/dev/console` device node, which an unprivileged cpio run cannot take from disk.
//! Several archives may be concatenated; the kernel unpacks them in order.

use std::io::{self, Write};

/// Builds one newc archive in memory.
#[derive(Default)]
pub struct Archive {
    buf: Vec<u8>,
    ino: u32,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

impl Archive {
    /// An empty archive.
    pub fn new() -> Archive {
        Archive::default()
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0, // uid: root
            0, // gid: root
            nlink,
            0, // mtime
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.buf.extend_from_slice(header.as_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// Adds a directory (parents must be added first).
    pub fn dir(&mut self, name: &str) -> &mut Self {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[]);
        self
    }

    /// Adds a regular file with permission bits `perm`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> &mut Self {
        self.entry(name, S_IFREG | (perm & 0o7777), (0, 0), data);
        self
    }

    /// Adds a symbolic link.
    pub fn symlink(&mut self, name: &str, target: &str) -> &mut Self {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
        self
    }

    /// Adds a character device node.
    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> &mut Self {
        self.entry(name, S_IFCHR | (perm & 0o7777), (major, minor), &[]);
        self
    }

    /// Ends the archive and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.buf
    }

    /// Ends the archive and writes it to `w`.
    pub fn write_to(self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Checks our archive against GNU cpio's reading of it, when the real cpio is installed
    /// (scripts/install-deps installs it).
    #[test]
    fn gnu_cpio_lists_what_we_wrote() {
        let mut a = Archive::new();
        a.dir("etc")
            .file("etc/token", 0o600, b"secret\n")
            .symlink("etc/link", "token")
            .char_dev("console", 0o600, 5, 1);
        let bytes = a.finish();
        assert!(bytes.len().is_multiple_of(4));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.cpio");
        std::fs::write(&p, &bytes).unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("cpio -itv < {}", p.display()))
            .output()
            .expect("cpio is installed (scripts/install-deps)");
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            listing.contains("-rw-------   1 root     root            7 Jan  1  1970 etc/token"),
            "{listing}"
        );
        assert!(listing.contains("etc/link -> token"), "{listing}");
        assert!(listing.contains("crw-------"), "{listing}");
    }
}
