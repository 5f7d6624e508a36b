//! The builder of a kernel hunt, by `[build] kind`: here, above the executor and the prebuilt
//! kernels both, so that the executor knows builders only through [`crate::exec::Builder`].

use crate::build::BuildError;
use crate::exec::kernel::KernelBuilder;
use crate::exec::{Builder, Task};
use crate::journal::BuildOutcome;
use std::sync::Arc;

/// The builder of a kernel hunt: from source, or a prebuilt hunt's fetch-and-unpack.
pub enum Kernels {
    /// `[build] kind = "source"`.
    Source(KernelBuilder),
    /// `[build] kind = "prebuilt"`.
    Prebuilt(Arc<crate::prebuilt::PrebuiltBuilder>),
}

impl Builder for Kernels {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, BuildError>> {
        match self {
            Kernels::Source(b) => b.build(commit),
            Kernels::Prebuilt(b) => b.build(commit),
        }
    }
}
