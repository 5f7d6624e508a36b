//! Candidate ids as a person reads them: a git commit's first 12 digits, a prebuilt kernel's
//! `package=version` whole.

/// A short commit id for messages: a git commit id's first 12 digits; any other candidate
/// id (a prebuilt kernel's `package=version`) whole, since its start says nothing.
pub fn short(id: &str) -> &str {
    if is_commit_id(id) {
        &id[..12.min(id.len())]
    } else {
        id
    }
}

/// Candidates as a person reads them: `a`, `a and b`, `a, b and c` ([`short`] ids).
pub fn shorts(ids: &[String]) -> String {
    let ids: Vec<&str> = ids.iter().map(|c| short(c)).collect();
    match ids.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => ids.concat(),
    }
}

/// Whether a candidate id is a git commit id (hex digits) rather than a prebuilt kernel's.
pub fn is_commit_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())
}
