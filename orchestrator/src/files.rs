//! Files firstbad reads but did not write: a run's result file in a checkout, a LAVA token
//! file. Each is opened without waiting (`O_NONBLOCK`: opening a FIFO without a writer would
//! block the open itself), read only when it is a regular file (a device such as /dev/zero
//! has no end, and its length reads 0), and only up to a bound the caller names (issue 32,
//! findings 2 and 5).
//!
//! A path inside a checkout is walked one directory at a time from the checkout with
//! `openat(2)` and `O_NOFOLLOW`, so that a symbolic link anywhere in it (committed to the
//! repository, or made by the command) is refused instead of followed out of the checkout:
//! to a host file a report would quote, or to a directory where a removal deletes someone
//! else's file.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why a file was not opened, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The system refused (no such file, no permission, an I/O error).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A component of the path inside the checkout is a symbolic link.
    #[error(
        "{} is a symbolic link: firstbad reads and removes only inside the checkout, through \
         no link; write a regular file there",
        at.display()
    )]
    Link {
        /// The path inside the checkout up to and including the link.
        at: PathBuf,
    },
    /// The file is a directory, a FIFO, a device or a socket.
    #[error("{kind}, not a regular file")]
    NotRegular {
        /// What it is instead ("a FIFO").
        kind: &'static str,
    },
    /// The file holds more than the caller reads.
    #[error("more than {limit} bytes")]
    TooLarge {
        /// The most the caller reads, in bytes.
        limit: u64,
    },
    /// The path is empty, absolute or climbs out with `..`.
    #[error("{} is not a relative path inside the directory", .0.display())]
    NotInside(PathBuf),
}

impl FileError {
    /// True when there is no file at the path (nothing to read or to remove).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Opens `path` as the user named it (links followed) without waiting, and only when it is a
/// regular file.
pub fn open_regular(path: &Path) -> Result<File, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    regular(file)
}

/// Opens `rel` inside the directory `root` without following a symbolic link in any of its
/// components and without waiting, and only when it is a regular file. `root` itself is
/// firstbad's (a checkout it made) and is opened as it is named.
pub fn open_inside(root: &Path, rel: &Path) -> Result<File, FileError> {
    let (dir, name) = parent_inside(root, rel)?;
    let fd = open_at(Some(&dir), name, libc::O_RDONLY | libc::O_NONBLOCK)
        .map_err(|e| link_or(e, &dir, name, rel))?;
    regular(File::from(fd))
}

/// Removes `rel` inside `root`, never through a symbolic link: a link among its directories is
/// refused; a link at `rel` itself is removed as a link, its target untouched. Nothing to
/// remove is not an error.
pub fn remove_inside(root: &Path, rel: &Path) -> Result<(), FileError> {
    let (dir, name) = match parent_inside(root, rel) {
        Err(e) if e.is_not_found() => return Ok(()),
        other => other?,
    };
    let c = c_name(name)?;
    // SAFETY: unlinkat(2) on a descriptor held open here and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(e.into());
        }
    }
    Ok(())
}

/// Reads `file` to its end, refused past `limit` bytes; at most `limit + 1` bytes are read.
pub fn read_capped(file: File, limit: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge { limit });
    }
    Ok(bytes)
}

/// `file` when it is a regular file, else what it is.
fn regular(file: File) -> Result<File, FileError> {
    let kind = file.metadata()?.file_type();
    match not_regular(kind) {
        None => Ok(file),
        Some(kind) => Err(FileError::NotRegular { kind }),
    }
}

/// What a file of type `kind` is ("a FIFO") when it is not a regular file.
pub fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        return None;
    }
    Some(if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    })
}

/// The directory holding `rel`'s last component, opened from `root` one component at a time
/// without following a link, and that last component.
fn parent_inside<'a>(
    root: &Path,
    rel: &'a Path,
) -> Result<(OwnedFd, &'a std::ffi::OsStr), FileError> {
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            _ => return Err(FileError::NotInside(rel.to_path_buf())),
        }
    }
    let Some(name) = names.pop() else {
        return Err(FileError::NotInside(rel.to_path_buf()));
    };
    let mut dir = open_at(None, root.as_os_str(), libc::O_RDONLY | libc::O_DIRECTORY)?;
    let mut walked = PathBuf::new();
    for n in names {
        walked.push(n);
        let next = open_at(Some(&dir), n, libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| link_or(e, &dir, n, &walked))?;
        dir = next;
    }
    Ok((dir, name))
}

/// `openat(2)` of one `name` in `dir` (or of a path, without `dir`) with `O_NOFOLLOW` and
/// `O_CLOEXEC` added; `O_NOFOLLOW` is dropped for the path without `dir` (the checkout itself).
fn open_at(dir: Option<&OwnedFd>, name: &std::ffi::OsStr, flags: i32) -> std::io::Result<OwnedFd> {
    let c = c_name(name)?;
    let (at, flags) = match dir {
        Some(d) => (d.as_raw_fd(), flags | libc::O_NOFOLLOW),
        None => (libc::AT_FDCWD, flags),
    };
    // SAFETY: openat(2) with a NUL-terminated name and a descriptor held open by the caller.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A name for a system call: refused when it holds a NUL byte.
fn c_name(name: &std::ffi::OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// [`FileError::Link`] at `at` when `name` in `dir` is a symbolic link (the error `O_NOFOLLOW`
/// gives is ELOOP, or ENOTDIR beside `O_DIRECTORY`), else the error as it is.
fn link_or(e: std::io::Error, dir: &OwnedFd, name: &std::ffi::OsStr, at: &Path) -> FileError {
    if !matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
        return e.into();
    }
    let Ok(c) = c_name(name) else {
        return e.into();
    };
    // SAFETY: an all-zero `stat` is a valid value for fstatat(2) to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat(2) on a descriptor held open, a NUL-terminated name, a `stat` to fill.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return FileError::Link {
            at: at.to_path_buf(),
        };
    }
    e.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) on a path the test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn only_a_regular_file_inside_is_read_and_no_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("tree"), dir.path().join("outside"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "root:x\n").unwrap();
        std::fs::write(root.join("sub/ok.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("sub/link")).unwrap();
        mkfifo(&root.join("fifo"));
        let read = |rel: &str| open_inside(&root, Path::new(rel)).and_then(|f| read_capped(f, 10));
        assert_eq!(read("sub/ok.json").unwrap(), b"{}");
        assert_eq!(read("./sub/ok.json").unwrap(), b"{}");
        for (rel, want) in [
            ("out/secret", "out is a symbolic link"),
            ("sub/link", "sub/link is a symbolic link"),
            ("fifo", "a FIFO, not a regular file"),
            ("sub", "a directory, not a regular file"),
            ("../outside/secret", "not a relative path inside"),
            ("/etc/passwd", "not a relative path inside"),
            ("", "not a relative path inside"),
        ] {
            let e = read(rel).unwrap_err().to_string();
            assert!(e.contains(want), "{rel}: {e}");
        }
        assert!(read("missing/x").unwrap_err().is_not_found());
        std::fs::write(root.join("big"), "x".repeat(11)).unwrap();
        assert_eq!(read("big").unwrap_err().to_string(), "more than 10 bytes");
        // A device, reached without a link: refused before any read.
        let e = open_inside(Path::new("/dev"), Path::new("zero")).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
    }

    #[test]
    fn a_removal_never_goes_through_a_linked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("tree"), dir.path().join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("result.json"), "theirs").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("result.json"), root.join("link")).unwrap();
        let e = remove_inside(&root, Path::new("out/result.json")).unwrap_err();
        assert!(e.to_string().starts_with("out is a symbolic link"), "{e}");
        // A link itself goes; what it points at stays.
        remove_inside(&root, Path::new("link")).unwrap();
        assert!(root.join("link").symlink_metadata().is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("result.json")).unwrap(),
            "theirs"
        );
        // Nothing there, or no directory for it: nothing to do.
        remove_inside(&root, Path::new("link")).unwrap();
        remove_inside(&root, Path::new("no/such/file")).unwrap();
    }
}
