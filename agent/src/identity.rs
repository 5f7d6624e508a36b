//! Who this agent is and what kernel it runs on: the answer to `GET /v1/identity`.

use firstbad_wire::{Identity, PROTOCOL_VERSION};

/// Where the kernel publishes an identifier that changes on every boot.
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// Why the identity could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// `uname(2)` failed.
    #[error("uname(2) failed: {0}")]
    Uname(#[source] std::io::Error),
    /// The boot id could not be read (is /proc mounted?).
    #[error("{BOOT_ID_PATH}: cannot read (is /proc mounted?): {0}")]
    BootId(#[source] std::io::Error),
}

/// The boot id, read once: it cannot change while this process runs, and reading it again
/// takes a descriptor, which a server at its descriptor limit (idle connections holding the
/// rest) does not have: `GET /v1/identity` answered 500 "Too many open files" to the token
/// holder under 200 idle connections past a 64-descriptor limit on a loaded machine (issue 38).
static BOOT_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn boot_id() -> Result<String, IdentityError> {
    if let Some(id) = BOOT_ID.get() {
        return Ok(id.clone());
    }
    let id = std::fs::read_to_string(BOOT_ID_PATH)
        .map_err(IdentityError::BootId)?
        .trim()
        .to_owned();
    Ok(BOOT_ID.get_or_init(|| id).clone())
}

/// Reads the running kernel's identity with `uname(2)` and `/proc` (the boot id once), nothing
/// else. The server calls it before it accepts a connection, so the boot id is read while
/// descriptors are free.
pub fn identity() -> Result<Identity, IdentityError> {
    // SAFETY: utsname is plain old data; all-zero bytes are a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname for the duration of the call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return Err(IdentityError::Uname(std::io::Error::last_os_error()));
    }
    let boot_id = boot_id()?;
    Ok(Identity {
        protocol: PROTOCOL_VERSION,
        agent_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel_release: c_field(&uts.release),
        boot_id,
        hostname: c_field(&uts.nodename),
    })
}

/// A NUL-terminated `utsname` field as a String (lossy: the kernel may hold any bytes).
fn c_field(field: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_field_stops_at_the_first_nul() {
        let field = [
            b'6' as libc::c_char,
            b'.' as libc::c_char,
            b'1' as libc::c_char,
            0,
            b'x' as libc::c_char,
        ];
        assert_eq!(c_field(&field), "6.1");
    }

    #[test]
    fn boot_id_looks_like_a_uuid() {
        let id = identity().expect("this test machine has /proc");
        assert_eq!(id.boot_id.len(), 36, "{:?}", id.boot_id);
        assert_eq!(id.protocol, PROTOCOL_VERSION);
    }
}
