//! `firstbad reproduce`: good and bad booted interleaved until the difference is confirmed or
//! refuted; the report printed, and written as HTML beside its journal.

use super::report::render;
use super::run::print_outcome;
use super::{load_file, open_state, runtime, Format};
use anyhow::Context as _;
use firstbad::config::HuntFile;
use firstbad::engine;
use firstbad::error::exit_code;
use firstbad::hunt;
use std::path::{Path, PathBuf};

/// Reproduces the regression of `hunt`; the exit code.
pub(super) fn run(hunt: &Path, html: Option<PathBuf>) -> anyhow::Result<u8> {
    let file = match load_file(hunt) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let result = match &file {
        HuntFile::Kernel(cfg) => {
            let rt = runtime()?;
            hunt::HuntError::or_interrupted(firstbad::interrupt::block_on(
                &rt,
                engine::reproduce(cfg),
            ))
        }
        HuntFile::Local(cfg) => match &cfg.test.measure {
            Some(m) => firstbad::local::measured::reproduce(cfg, m),
            None => {
                eprintln!(
                    "firstbad: {}: reproduce compares two measured versions: give \
                     [test] a metric (docs/metric-hunts.md), or use a \
                     kernel hunt file",
                    hunt.display()
                );
                return Ok(exit_code::BAD_INPUT);
            }
        },
    };
    let ended = result.is_ok();
    let code = print_outcome(result, &file, hunt);
    if !ended {
        return Ok(code);
    }
    let dir = engine::reproduce_dir(file.state_dir());
    let Some((id, state)) = open_state(&dir, "")? else {
        return Ok(code);
    };
    let ctx = firstbad::report::Context::of(&file, true).expect("a measured hunt: checked above");
    println!();
    print!(
        "{}",
        render(&ctx, file.repo(), &id, &state, Some(Format::Email))
    );
    let html = html.unwrap_or_else(|| dir.join("report.html"));
    let text = render(&ctx, file.repo(), &id, &state, Some(Format::Html));
    std::fs::write(&html, text).with_context(|| format!("writing {}", html.display()))?;
    eprintln!(
        "firstbad: wrote {} (plots and every boot's samples)",
        html.display()
    );
    Ok(code)
}
