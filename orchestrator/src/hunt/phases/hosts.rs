//! The pool: a host whose boots keep failing while the same kernels boot elsewhere leaves it.

use super::super::driver::{Decision, Driver};
use super::super::summary::failing_host;
use super::super::HuntState;
use crate::journal::Event;

/// A `HostRetired` for the first host of the pool that [`failing_host`] blames, while at
/// least two hosts are left: the problem is the host, not the kernels (never the last one).
pub fn retire_failing(d: &Driver, state: &HuntState) -> Option<Decision> {
    let active: Vec<&str> = d.active_hosts(state).map(|h| h.name.as_str()).collect();
    if active.len() < 2 {
        return None;
    }
    active.iter().find_map(|name| {
        let reason = failing_host(state, name)?;
        Some(Decision::Record(Event::HostRetired {
            host: (*name).to_owned(),
            reason,
        }))
    })
}
