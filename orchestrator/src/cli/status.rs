//! `firstbad status`: where a hunt is, from its journal, safe while it runs; `--follow`
//! refreshes it until the hunt ends.

use super::{chain_of, load_file, run_ended, step_stages};
use firstbad::config::HuntFile;
use firstbad::engine;
use firstbad::error::exit_code;
use firstbad::hunt::{self, journal_path, HuntState};
use firstbad::journal::Journal;
use firstbad::report;
use std::path::Path;

/// Prints the status of `hunt`, once or until it ends (`follow`); the exit code.
pub(super) fn run(hunt: &Path, follow: bool, interval: u64) -> anyhow::Result<u8> {
    let file = match load_file(hunt) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    loop {
        let path = journal_path(file.state_dir());
        let opened = if path.exists() {
            let j = Journal::open_read_only(&path)?;
            j.identity()?
                .map(|id| (id, j.events()))
                .map(|(id, e)| e.map(|e| (id, e)))
        } else {
            None
        };
        let ended = match opened.transpose()? {
            None => {
                println!(
                    "{}: not started (no journal in {})",
                    file.name(),
                    file.state_dir().display()
                );
                false
            }
            Some((id, entries)) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                if follow && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                    print!("\x1b[2J\x1b[H");
                }
                print!("{}", render(&file, &id, &entries, now));
                // A chained hunt in its source stage: that stage too.
                if let (HuntFile::Kernel(cfg), Some(chain)) = (&file, chain_of(&file)) {
                    let j = Journal::open_read_only(&path)?.stage(engine::chain::SOURCE_STAGE);
                    if let Some(sid) = j.identity()? {
                        let source = engine::chain::source_config(cfg, chain);
                        println!("\nsource stage ({}):", chain.repo.display());
                        let entries = j.events()?;
                        print!("{}", report::status::render(&source, &sid, &entries, now));
                        // Followed until the source stage ends.
                        if HuntState::replay(&entries).end.is_none() && follow {
                            std::thread::sleep(std::time::Duration::from_secs(interval.max(1)));
                            continue;
                        }
                    }
                }
                // The further steps of a regression of several, each a stage of its own.
                let steps = step_stages(file.state_dir())?;
                for (n, sid, entries, _) in &steps {
                    println!(
                        "\nstep {n}: the part from {} to {}:",
                        hunt::short(&sid.good),
                        hunt::short(&sid.bad)
                    );
                    print!("{}", render(&file, sid, entries, now));
                }
                // The culprits of several steps reverted together, once begun.
                let j = Journal::open_read_only(&path)?.stage(hunt::steps::TOGETHER);
                let together = match j.identity()? {
                    Some(tid) => {
                        let entries = j.events()?;
                        println!("\nthe culprits reverted together:");
                        print!("{}", render(&file, &tid, &entries, now));
                        Some(HuntState::replay(&entries))
                    }
                    None => None,
                };
                // Followed until the last part of the regression is hunted.
                run_ended(
                    &file,
                    (&id, &HuntState::replay(&entries)),
                    &steps,
                    together.as_ref(),
                )
            }
        };
        if !follow || ended {
            return Ok(exit_code::OK);
        }
        if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            println!("---");
        }
        std::thread::sleep(std::time::Duration::from_secs(interval.max(1)));
    }
}

/// The status of one stage of `file`'s journal: its `id` and `entries`, at `now`.
fn render(
    file: &HuntFile,
    id: &firstbad::journal::HuntIdentity,
    entries: &[firstbad::journal::Entry],
    now: i64,
) -> String {
    match file {
        HuntFile::Kernel(cfg) => report::status::render(cfg, id, entries, now),
        HuntFile::Local(cfg) => match &cfg.test.measure {
            Some(m) => {
                let view = report::status::Hunt {
                    name: &cfg.name,
                    repo: &cfg.repo,
                    hosts: (0..cfg.test.jobs).map(|j| format!("job{j}")).collect(),
                    classify: &m.classify,
                };
                report::status::render_hunt(&view, id, entries, now)
            }
            None => report::local::status(cfg, id, entries, now),
        },
    }
}
