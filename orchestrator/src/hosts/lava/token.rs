//! The LAVA token file: a small regular file that other users cannot read.

use super::*;

/// The most a token file may hold: a LAVA token is 32-128 characters.
pub(super) const TOKEN_FILE_LIMIT: u64 = 4096;

/// A token file's text, and whether every user of the machine can read it.
#[derive(Debug)]
pub(super) struct TokenFile {
    pub(super) text: String,
    /// Readable by others (`o+r`): the host warns, asking for `chmod 600` (issue 32,
    /// finding 7).
    pub(super) world_readable: bool,
    /// Its permission bits, for the warning.
    pub(super) mode: u32,
}

/// A token file's text: a regular file of at most [`TOKEN_FILE_LIMIT`] bytes, opened without
/// waiting, so that a FIFO or a device named by mistake is refused instead of blocking or read
/// without end (issue 32, finding 5: /dev/zero took 545 MB).
pub(super) fn read_token_file(path: &Path) -> Result<TokenFile, String> {
    use std::os::unix::fs::PermissionsExt;
    let file = crate::files::open_regular(path).map_err(|e| e.to_string())?;
    let mode = file
        .metadata()
        .map_err(|e| e.to_string())?
        .permissions()
        .mode()
        & 0o7777;
    let bytes = crate::files::read_capped(file, TOKEN_FILE_LIMIT).map_err(|e| match e {
        crate::files::FileError::TooLarge { .. } => format!("{e}: not a token"),
        e => e.to_string(),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text: not a token".to_owned())?;
    Ok(TokenFile {
        text,
        world_readable: mode & 0o004 != 0,
        mode,
    })
}
