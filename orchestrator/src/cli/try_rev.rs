//! `firstbad try`: one revision built, booted and measured with the hunt's settings, to check
//! a set-up; nothing goes into the hunt's journal.

use super::{load, runtime};
use firstbad::engine;
use firstbad::error::exit_code;
use std::path::Path;

/// Builds, boots (when `boot`) and measures `rev`; prints the build and the boot as JSON;
/// the exit code. With `--build-only`, a build that failed is exit 5 (as a hunt's endpoint
/// that does not build): a script warming the cache must not go on as if it were warm.
pub(super) fn run(hunt: &Path, rev: &str, boot_wanted: bool) -> anyhow::Result<u8> {
    let cfg = match load(hunt) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let rt = runtime()?;
    let tried =
        match firstbad::interrupt::block_on(&rt, engine::try_revision(&cfg, rev, boot_wanted))? {
            Ok(tried) => tried,
            Err(i) => {
                // Nothing of a try is kept but a finished kernel in the build cache.
                eprintln!(
                    "firstbad: {i}: stopped the build or boot under way; nothing was kept but \
                 kernels that finished building"
                );
                return Ok(i.exit_code());
            }
        };
    match tried {
        Ok((build, boot)) => {
            println!("build: {}", serde_json::to_string_pretty(&build)?);
            if !boot_wanted {
                if let Some(why) = build.failure() {
                    eprintln!("firstbad: {rev}: {why}");
                    return Ok(exit_code::INFRASTRUCTURE);
                }
            }
            if let Some(boot) = boot {
                let mut v = serde_json::to_value(&boot)?;
                // Summaries only: every sample is in the JSON of a real hunt's journal.
                if let Some(series) = v.pointer_mut("/result/series") {
                    *series = serde_json::Value::String("(omitted)".into());
                }
                println!("boot: {}", serde_json::to_string_pretty(&v)?);
            }
            Ok(exit_code::OK)
        }
        Err(e) => {
            eprintln!("firstbad: {e}");
            Ok(e.exit_code())
        }
    }
}
