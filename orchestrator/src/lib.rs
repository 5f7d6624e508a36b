//! firstbad: automated bisection of Linux kernel performance regressions.
//!
//! The hunt loop ([`hunt`]) decides; the executor ([`exec`]) runs the builder ([`build`]) and
//! the test hosts ([`hosts`]); [`engine`] composes them for a hunt file. [`search`],
//! [`sequential`] and [`posterior`] are pure and carry the logic worth testing hard;
//! [`journal`] records every step before it is taken so that a killed hunt resumes exactly;
//! [`sim`] runs the same statistics on synthetic histories.

pub mod agent_client;
pub mod build;
pub mod changepoint;
pub mod config;
pub mod engine;
pub mod error;
pub mod exec;
pub mod files;
pub mod history;
pub mod hosts;
pub mod hunt;
pub mod ids;
pub mod inputs;
pub mod interrupt;
pub mod journal;
pub mod kernel_id;
#[cfg(test)]
mod layering;
pub mod local;
pub mod metric;
pub mod notify;
pub mod posterior;
pub mod prebuilt;
pub mod pressure;
pub mod replay;
pub mod report;
pub mod search;
pub mod sequential;
pub mod sim;
pub mod stats;
pub mod text;
pub mod watch;
