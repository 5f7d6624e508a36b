//! The hunt's phases, one file each; [`super::driver::Driver::next`] calls the one the state
//! is in.

pub mod baselines;
pub mod bisect;
pub mod confirm;
pub mod drift;
pub mod exact;
pub mod forecast;
pub mod hosts;
pub mod refine;
pub mod revert;
mod rounds;
