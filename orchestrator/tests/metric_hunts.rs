//! Metric command hunts (`[test] metric`) through the real binary, on real git repositories
//! made here, with commands whose numbers are fixed by the commit (a file `VALUE`) and a small
//! spread by run: what each way a run can end means, and what the reports show. The hunts on
//! real timing noise are in `metric_noise.rs`.

mod common;
use common::{git_ok, git_str};
use firstbad::journal::{BootOutcome, Event, Journal};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The benchmark of every test repository: prints `{"ms": VALUE.r}`, r from the run number
/// (a spread of 0.0 to 0.6 ms), after the behaviours marker files ask for.
const BENCH: &str = r#"#!/bin/sh
test -e EXIT125 && exit 125
test -e EXIT127 && exit 127
test -e CRASH && { echo "bench: segfault (simulated)" >&2; exit 3; }
test -e SILENT && exit 0
echo "{\"ms\": $(cat VALUE).$(( ${FIRSTBAD_RUN:-0} % 7 ))}"
"#;

/// A linear history of `n` commits: commit i has VALUE 100 before `culprit` and 130 from it on;
/// `marks` puts a marker file into the commits named.
struct Repo {
    dir: tempfile::TempDir,
    ids: Vec<String>,
}

impl Repo {
    fn new(n: usize, culprit: usize, marks: &[(usize, &str)]) -> Repo {
        let values: Vec<&str> = (0..n)
            .map(|i| if i >= culprit { "130" } else { "100" })
            .collect();
        Repo::with_values(&values, marks)
    }

    /// A linear history of one commit per value, commit i's VALUE being `values[i]`.
    fn with_values(values: &[&str], marks: &[(usize, &str)]) -> Repo {
        Repo::with_files(values, marks, |_, _| {})
    }

    /// [`Repo::with_values`] with what `files(dir, repo)` puts into the work tree before the
    /// first commit, committed in every commit.
    fn with_files(
        values: &[&str],
        marks: &[(usize, &str)],
        files: impl FnOnce(&Path, &Path),
    ) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git_ok(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("bench.sh"), BENCH).unwrap();
        files(dir.path(), &repo);
        let mut ids = Vec::new();
        for (i, value) in values.iter().enumerate() {
            std::fs::write(repo.join("VALUE"), format!("{value}\n")).unwrap();
            for marker in ["EXIT125", "EXIT127", "CRASH", "SILENT", "NOBUILD"] {
                let path = repo.join(marker);
                if marks.iter().any(|&(c, m)| c == i && m == marker) {
                    std::fs::write(&path, "").unwrap();
                } else if path.exists() {
                    std::fs::remove_file(&path).unwrap();
                }
            }
            git_ok(&repo, &["add", "-A"]);
            git_ok(
                &repo,
                &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
            );
            ids.push(git_str(&repo, &["rev-parse", "HEAD"]));
        }
        Repo { dir, ids }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A metric hunt file over the whole history, with `extra` lines in `[test]`.
    fn hunt(&self, extra: &str) -> PathBuf {
        let p = self.path().join("hunt.toml");
        std::fs::write(
            &p,
            format!(
                "[hunt]\nname = \"m\"\nrepo = \"repo\"\ngood = \"{}\"\nbad = \"{}\"\n\
                 state_dir = \"state\"\n\n[test]\nbuild = \"test ! -e NOBUILD || \
                 {{ echo 'error: NOBUILD is set' >&2; exit 2; }}\"\ncommand = \"sh bench.sh\"\n\
                 metric = \"ms\"\n{extra}\n",
                self.ids[0],
                self.ids.last().unwrap()
            ),
        )
        .unwrap();
        p
    }

    fn events(&self) -> Vec<Event> {
        Journal::open_read_only(&self.path().join("state/journal.sqlite"))
            .expect("journal")
            .events()
            .expect("events")
            .into_iter()
            .map(|e| e.event)
            .collect()
    }

    /// Every finished run of `commit`.
    fn runs_of(&self, commit: &str) -> Vec<BootOutcome> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::BootFinished {
                    commit: c, outcome, ..
                } if c == commit => Some(outcome),
                _ => None,
            })
            .collect()
    }
}

fn firstbad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(args)
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("firstbad runs")
}

fn run(hunt: &Path) -> (i32, String, String) {
    let out = firstbad(&["run", &hunt.display().to_string()]);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_metric_hunt_names_the_culprit_and_confirms_it() {
    let r = Repo::new(40, 23, &[]);
    let (code, out, err) = run(&r.hunt(""));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("first bad commit: {}", &r.ids[23][..12])),
        "{out}"
    );
    assert!(out.contains("confirmed: "), "{out}");
    // Every run kept its value; the good endpoint ran beside the candidates (drift checks).
    let good = r.runs_of(&r.ids[0]);
    assert!(good.len() >= 8, "{} runs of good", good.len());
    let events = r.events();
    let drift_checks = events
        .iter()
        .filter(|e| matches!(e, Event::DriftCheck { .. }))
        .count();
    assert!(
        drift_checks >= 1,
        "no drift check in {} events",
        events.len()
    );
    // Rerunning an ended hunt answers from the journal and runs nothing.
    let before = events.len();
    let (code, out2, _) = run(&r.hunt(""));
    assert_eq!((code, out2), (0, out));
    assert_eq!(r.events().len(), before);
}

#[test]
fn a_crashing_or_silent_run_is_a_failed_sample_and_never_a_verdict() {
    // c10 crashes (exit 3) and c30 prints no metric: both are skipped after their failed
    // runs, and the culprit (c20) is still found between them.
    let r = Repo::new(40, 20, &[(10, "CRASH"), (30, "SILENT")]);
    let (code, out, err) = run(&r.hunt("[classify]\nmax_failed_boots = 2\n"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&r.ids[20][..12]), "{out}");
    for (i, why) in [
        (10, "exit 3: bench: segfault (simulated)"),
        (30, "no metric"),
    ] {
        let runs = r.runs_of(&r.ids[i]);
        if runs.is_empty() {
            continue; // the bisection did not need it
        }
        assert!(
            runs.iter().all(|o| matches!(o,
                BootOutcome::Failed { reason, console, untestable: false }
                    if reason.contains(why) && console.exists())),
            "c{i}: {runs:?}"
        );
    }
}

/// Issue 32, finding 3: a metric at or below zero was compared as if it were 1e-9, so good at
/// -10 and bad at -5 read as "good and bad are indistinguishable … p = 1.0", exit 3. Such a
/// run is a failed sample that names the value and says how to give a usable metric; the
/// endpoints failing stops the hunt for a person, never as "not reproduced".
#[test]
fn a_metric_at_or_below_zero_is_a_failed_run_that_names_it_never_not_reproduced() {
    let r = Repo::with_values(&["-10", "-10", "-7", "-5"], &[]);
    let (code, out, err) = run(&r.hunt(""));
    assert_ne!(code, 3, "not reproduced: {out}{err}");
    let mut runs = r.runs_of(&r.ids[0]);
    runs.extend(r.runs_of(&r.ids[3]));
    assert!(!runs.is_empty(), "{out}{err}");
    for o in &runs {
        assert!(
            matches!(o, BootOutcome::Failed { reason, untestable: false, .. }
                if reason.contains("ms is -") && reason.contains("positive values on a log scale")),
            "{o:?}"
        );
    }
    assert!(
        format!("{out}{err}").contains("give a positive metric"),
        "{out}{err}"
    );
}

/// Markers on c15..=c24, where git bisect's first choices among 40 commits fall.
fn around_the_middle(marker: &'static str) -> Vec<(usize, &'static str)> {
    (15..=24).map(|i| (i, marker)).collect()
}

#[test]
fn exit_125_skips_the_commit_after_one_run() {
    let r = Repo::new(40, 30, &around_the_middle("EXIT125"));
    let (code, out, err) = run(&r.hunt(""));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&r.ids[30][..12]), "{out}");
    let mut tested = 0;
    for i in 15..=24 {
        let runs = r.runs_of(&r.ids[i]);
        if runs.is_empty() {
            continue;
        }
        tested += 1;
        assert_eq!(runs.len(), 1, "c{i}: {runs:?}");
        assert!(matches!(
            &runs[0],
            BootOutcome::Failed {
                untestable: true,
                ..
            }
        ));
        assert!(r.events().iter().any(|e| matches!(e,
            Event::Verdict { commit, verdict: firstbad::journal::Verdict::Skip, .. }
                if *commit == r.ids[i])));
    }
    assert!(tested >= 1, "no marked commit was tested");
}

#[test]
fn exit_127_stops_the_hunt_for_a_person_and_names_the_command() {
    let r = Repo::new(40, 30, &around_the_middle("EXIT127"));
    let (code, out, err) = run(&r.hunt(""));
    assert_eq!(code, 5, "{out}{err}");
    assert!(
        err.contains("exit 127") && err.contains("sh bench.sh") && err.contains("rerun"),
        "{err}"
    );
    // Nothing was judged from it.
    for i in 15..=24 {
        assert!(!r.events().iter().any(|e| matches!(e,
            Event::Verdict { commit, .. } if *commit == r.ids[i])));
    }
}

#[test]
fn a_candidate_that_does_not_build_is_skipped_with_its_error_lines() {
    let r = Repo::new(40, 30, &around_the_middle("NOBUILD"));
    let (code, out, err) = run(&r.hunt(""));
    assert_eq!(code, 0, "{out}{err}");
    let skipped: Vec<(String, String)> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Verdict { commit, reason, .. } if r.ids[15..=24].contains(&commit) => {
                Some((commit, reason))
            }
            _ => None,
        })
        .collect();
    assert!(!skipped.is_empty(), "no marked commit was tested");
    for (commit, reason) in skipped {
        assert!(
            reason.contains("build failed: exit status: 2: error: NOBUILD is set"),
            "{reason}"
        );
        assert!(
            r.runs_of(&commit).is_empty(),
            "an unbuilt commit never runs"
        );
    }
}

#[test]
fn a_changed_metric_is_refused_by_name() {
    let r = Repo::new(20, 12, &[]);
    let (code, out, err) = run(&r.hunt(""));
    assert_eq!(code, 0, "{out}{err}");
    let changed = r.hunt("direction = \"higher-is-better\"\n");
    let (code, _, err) = run(&changed);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("test.direction"), "{err}");
}

#[test]
fn every_report_format_shows_a_metric_hunt_with_its_runs() {
    let r = Repo::new(24, 15, &[]);
    let hunt = r.hunt("");
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 0, "{out}{err}");
    let h = hunt.display().to_string();
    let report = |format: &str| {
        let out = firstbad(&["report", &h, "--format", format]);
        assert!(out.status.success(), "{format}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json: serde_json::Value = serde_json::from_str(&report("json")).expect("json");
    assert_eq!(json["command"], "sh bench.sh");
    assert_eq!(json["metric"], "ms");
    assert_eq!(json["first_bad"]["id"], r.ids[15].as_str());
    assert_eq!(json["confidence"]["confirmed"], true);
    let email = report("email");
    assert!(email.contains("(command: sh bench.sh)"), "{email}");
    assert!(email.contains(&r.ids[15][..12]), "{email}");
    let html = report("html");
    assert!(html.contains("command, one run per boot: sh bench.sh"));
    let md = report("markdown");
    assert!(md.contains(&r.ids[15][..12]), "{md}");
    let status = firstbad(&["status", &h]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("host job0: idle"), "{status}");
}

#[test]
fn reproduce_confirms_a_difference_and_bisects_nothing() {
    // Two versions on two branches that do not descend from each other: compared as they are.
    let r = Repo::new(10, 5, &[]);
    let repo = r.path().join("repo");
    git_ok(&repo, &["checkout", "-q", "-b", "other", &r.ids[2]]);
    std::fs::write(repo.join("VALUE"), "131\n").unwrap();
    git_ok(&repo, &["commit", "-q", "-am", "other: slower"]);
    let other = git_str(&repo, &["rev-parse", "HEAD"]);
    let hunt = r.path().join("reproduce.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"r\"\nrepo = \"repo\"\ngood = \"{}\"\nbad = \"{other}\"\n\
             state_dir = \"state\"\n\n[test]\ncommand = \"sh bench.sh\"\nmetric = \"ms\"\n",
            r.ids[4]
        ),
    )
    .unwrap();
    let h = hunt.display().to_string();
    let out = firstbad(&["reproduce", &h]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for section in [
        "reproduced: regression confirmed",
        "(reproduced)",
        "median",
        "[..]: 95% percentile-bootstrap intervals",
        "Confidence: high",
        "nothing\nbetween them was bisected",
        &format!("bad:  {other} other: slower"),
        "firstbad reproduce ",
        "The workload (",
    ] {
        assert!(stdout.contains(section), "{section:?} in {stdout}");
    }
    assert!(!stdout.contains("git bisect log"), "{stdout}");
    let html = std::fs::read_to_string(r.path().join("state/reproduce/report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Kernels compared"));
    // Only the two versions ran, in the reproduction's own journal: the hunt's is untouched.
    let events: Vec<Event> =
        Journal::open_read_only(&r.path().join("state/reproduce/journal.sqlite"))
            .unwrap()
            .events()
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
    let mut ran: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::BootFinished { commit, .. } => Some(commit.as_str()),
            _ => None,
        })
        .collect();
    ran.sort_unstable();
    ran.dedup();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(!r.path().join("state/journal.sqlite").exists());
    // Rerun: the same answer from the journal, nothing run again.
    let again = firstbad(&["reproduce", &h]);
    assert_eq!(again.status.code(), Some(0));
    let n = Journal::open_read_only(&r.path().join("state/reproduce/journal.sqlite"))
        .unwrap()
        .events()
        .unwrap()
        .len();
    assert_eq!(n, events.len());
}

#[test]
fn reproduce_refutes_two_versions_that_measure_alike() {
    // c0 and c4 both print 100.r: exit 3, with the figures.
    let r = Repo::new(5, 99, &[]);
    let hunt = r.hunt("");
    let text = std::fs::read_to_string(&hunt).unwrap().replace(
        &format!("good = \"{}\"", r.ids[0]),
        &format!("good = \"{}\"", r.ids[1]),
    );
    std::fs::write(&hunt, text).unwrap();
    let out = firstbad(&["reproduce", &hunt.display().to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("Not reproduced"), "{stdout}");
}

/// A benchmark on a machine that slows down: each run reads the commit's VALUE and adds what
/// the machine's state file says for this run number (the count of runs so far, machine-wide).
fn slowing_machine(dir: &Path, shift: &str) -> PathBuf {
    let script = dir.join("slowing.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nc={count}\nn=$(cat $c 2>/dev/null || echo 0); n=$((n + 1)); echo $n > $c\n\
             v=$(cat VALUE)\nawk -v v=$v -v n=$n -v r=$(( n % 7 )) 'BEGIN {{ {shift}; \
             printf \"{{\\\"ms\\\": %.3f}}\\n\", v + r / 10 + s }}'\n",
            count = dir.join("runs-so-far").display(),
        ),
    )
    .unwrap();
    script
}

#[test]
fn a_machine_that_slows_down_steadily_is_followed_and_the_culprit_still_found() {
    // 0.05 ms slower every run: over the ~100 runs of the hunt, half the 30 ms regression.
    let r = Repo::new(40, 23, &[]);
    let script = slowing_machine(r.path(), "s = n * 0.05");
    let hunt = r.hunt("");
    with_command(&hunt, &script);
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&r.ids[23][..12]), "{out}");
    // The re-runs of good saw the machine move.
    let checks: Vec<String> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::DriftCheck { summary, .. } => Some(summary),
            _ => None,
        })
        .collect();
    assert!(checks.len() >= 2, "{checks:?}");
}

/// A benchmark on a machine that steps 15 ms slower, for good, from the `after + 1`-th run of
/// commit `good` on: each run reads the commit's VALUE; the machine counts the runs of `good`.
fn stepping_machine(dir: &Path, good: &str, after: usize) -> PathBuf {
    let script = dir.join("stepping.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ng={count}\nk=$(cat $g 2>/dev/null || echo 0)\n\
             if [ \"$(git rev-parse HEAD)\" = {good} ]; then k=$((k + 1)); echo $k > $g; fi\n\
             v=$(cat VALUE)\nawk -v v=$v -v k=$k 'BEGIN {{ s = (k > {after}) ? 15 : 0; \
             printf \"{{\\\"ms\\\": %.3f}}\\n\", v + s }}'\n",
            count = dir.join("good-runs").display(),
        ),
    )
    .unwrap();
    script
}

#[test]
fn a_machine_that_steps_half_way_to_bad_stops_the_hunt_for_a_person() {
    // Every run of good gives 100 and of bad 130, without noise: the baselines' first look, at
    // 5 runs a side, decides. From good's 6th run on, the first drift check's, every run is
    // 15 ms slower, and stays so. (The step came at the machine's 20th run before: with
    // baselines of 5 runs a side it came during the final re-test, which read it against good
    // and bad of the same rounds and confirmed the right culprit; no drift check saw it.)
    let r = Repo::new(40, 23, &[]);
    let script = stepping_machine(r.path(), &r.ids[0], 5);
    let hunt = r.hunt("");
    with_command(&hunt, &script);
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 5, "{out}{err}");
    assert!(err.contains("drifted"), "{err}");
    // Not on the first re-measurements: once the move had lasted.
    let drifted: Vec<String> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::DriftCheck {
                drifted: true,
                summary,
                ..
            } => Some(summary),
            _ => None,
        })
        .collect();
    assert!(
        drifted.iter().any(|s| s.contains("the move lasted")),
        "{drifted:?}"
    );
}

#[test]
fn two_jobs_sampling_one_commit_never_read_each_others_result_file() {
    // The result goes to a file in the tree, written half-way through the run: two runs of one
    // commit at once in one tree would delete or read each other's.
    let r = Repo::new(40, 23, &[]);
    let script = r.path().join("to-file.sh");
    std::fs::write(
        &script,
        "sleep 0.05\necho \"{\\\"ms\\\": $(cat VALUE).$(( ${FIRSTBAD_RUN:-0} % 7 ))}\" > out.json\n\
         sleep 0.05\n",
    )
    .unwrap();
    let hunt = r.hunt("jobs = 2\noutput = \"out.json\"\n");
    with_command(&hunt, &script);
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&r.ids[23][..12]), "{out}");
    let failed: Vec<String> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::BootFinished {
                outcome: BootOutcome::Failed { reason, .. },
                ..
            } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
}

/// Makes `hunt` run `sh script` instead of the repository's bench.sh.
fn with_command(hunt: &Path, script: &Path) {
    let text = std::fs::read_to_string(hunt).unwrap().replace(
        "command = \"sh bench.sh\"",
        &format!("command = \"sh {}\"", script.display()),
    );
    std::fs::write(hunt, text).unwrap();
}

/// Makes `hunt` run `line` instead of the repository's bench.sh.
fn with_command_line(hunt: &Path, line: &str) {
    let text = std::fs::read_to_string(hunt)
        .unwrap()
        .replace("command = \"sh bench.sh\"", &format!("command = {line:?}"));
    std::fs::write(hunt, text).unwrap();
}

/// A host file a run must never quote: a line of /etc/shadow's shape.
const SECRET: &str = "root:$6$firstbad-test-secret$:19000:0:99999:7:::";

/// `dir/outside/shadow`, a file outside every checkout holding [`SECRET`].
fn outside_secret(dir: &Path) -> PathBuf {
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let shadow = outside.join("shadow");
    std::fs::write(&shadow, format!("{SECRET}\n")).unwrap();
    shadow
}

/// `firstbad run hunt` under a 4 GB address-space limit (a read without end fails instead of
/// taking the machine's memory), killed after `secs`: (exit code, or None when it had to be
/// killed; stdout; stderr).
fn run_bounded(hunt: &Path, secs: u64) -> (Option<i32>, String, String) {
    let mut child = Command::new("sh")
        .args([
            "-c",
            "ulimit -v 4000000 && exec \"$0\" run \"$1\"",
            env!("CARGO_BIN_EXE_firstbad"),
            &hunt.display().to_string(),
        ])
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("firstbad runs");
    let start = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            child.kill().expect("kill");
            child.wait().expect("wait");
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The failed runs' reasons of a hunt, asserting it stopped for a person (exit 5) after runs
/// that all failed, none of them quoting [`SECRET`].
fn failed_reasons(r: &Repo, hunt: &Path) -> Vec<String> {
    let (code, out, err) = run_bounded(hunt, 90);
    let code = code.unwrap_or_else(|| panic!("firstbad still running after 90 s: {out}{err}"));
    assert!(
        !format!("{out}{err}").contains("firstbad-test-secret"),
        "{out}{err}"
    );
    assert_eq!(code, 5, "{out}{err}");
    let events = r.events();
    let quoted: Vec<String> = events
        .iter()
        .map(|e| format!("{e:?}"))
        .filter(|e| e.contains("firstbad-test-secret"))
        .collect();
    assert!(
        quoted.is_empty(),
        "the journal quotes the host file: {quoted:?}"
    );
    let reasons: Vec<String> = events
        .into_iter()
        .filter_map(|e| match e {
            Event::BootFinished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .map(|o| match o {
            BootOutcome::Failed { reason, .. } => reason,
            other => panic!("a run through a link gave {other:?}"),
        })
        .collect();
    assert!(!reasons.is_empty(), "{out}{err}");
    reasons
}

/// Issue 32, finding 2: `test.output` under a directory of the checkout that is a symbolic
/// link (here committed) made firstbad delete the file it points at, outside the checkout,
/// before each run, and read what was there after it. A run whose output path leaves the
/// checkout through a link fails, naming the link, without running, reading or removing.
#[test]
fn a_result_file_behind_a_symlinked_directory_is_neither_removed_nor_read() {
    let r = Repo::with_files(&["100", "130"], &[], |dir, repo| {
        let shadow = outside_secret(dir);
        std::fs::copy(&shadow, dir.join("outside/result.json")).unwrap();
        std::os::unix::fs::symlink(dir.join("outside"), repo.join("out")).unwrap();
    });
    let hunt = r.hunt("output = \"out/result.json\"\n");
    with_command_line(&hunt, "true");
    let outside = r.path().join("outside/result.json");
    let reasons = failed_reasons(&r, &hunt);
    assert!(
        outside.exists(),
        "firstbad deleted {} outside the checkout",
        outside.display()
    );
    for reason in &reasons {
        assert!(
            reason.contains("out/result.json: out is a symbolic link"),
            "{reason}"
        );
    }
}

/// Issue 32, finding 2: a result file that is a symbolic link, made by the command, was
/// followed: to a host file, whose first line the journal and every report then quoted
/// ("no metric: … it begins root:…"); to /dev/zero, read until memory ran out (the size check
/// read 0, a device's length). A committed link is removed before the run as a link, its
/// target untouched. The file is opened without following a link and the run fails, naming it.
#[test]
fn a_result_file_that_is_a_symlink_is_never_followed() {
    for (case, command) in [
        ("a host file", "ln -sf ../../../outside/shadow result.json"),
        ("a device", "ln -sf /dev/zero result.json"),
        ("a committed link", "true"),
    ] {
        let r = Repo::with_files(&["100", "130"], &[], |dir, repo| {
            let shadow = outside_secret(dir);
            std::os::unix::fs::symlink(&shadow, repo.join("result.json")).unwrap();
        });
        let hunt = r.hunt("output = \"result.json\"\n");
        with_command_line(&hunt, command);
        let reasons = failed_reasons(&r, &hunt);
        let shadow = std::fs::read_to_string(r.path().join("outside/shadow")).unwrap();
        assert_eq!(shadow.trim(), SECRET, "{case}");
        let want = if case == "a committed link" {
            "no result file result.json: No such file"
        } else {
            "result.json is a symbolic link"
        };
        for reason in &reasons {
            assert!(reason.contains(want), "{case}: {reason}");
        }
    }
}

/// Issue 32, finding 2: a result file that is a FIFO blocked the hunt for good (the read
/// waited for a writer that never came). It is opened without waiting and refused as a FIFO.
#[test]
fn a_result_file_that_is_a_fifo_is_refused_without_waiting() {
    let r = Repo::with_values(&["100", "130"], &[]);
    let hunt = r.hunt("output = \"result.json\"\n");
    with_command_line(&hunt, "mkfifo result.json");
    for reason in failed_reasons(&r, &hunt) {
        assert!(
            reason.contains("result.json: a FIFO, not a regular file"),
            "{reason}"
        );
    }
}

/// Issue 32, finding 8: a command whose stdout (or result file) holds more than firstbad reads
/// for a metric stopped the hunt with exit 5, "rerun to resume", and every rerun did the same
/// (or, for the result file, failed run after run until the endpoints stopped the hunt, exit
/// 5). It is bad input, exit 2, on the first such run, naming the bound and the fix.
#[test]
fn an_output_larger_than_firstbad_reads_is_bad_input_on_the_first_run() {
    // 70 MB of metric lines, past the 64 MiB read.
    let big = "yes '{\"ms\": 1}' | head -c 70000000";
    for (extra, command, wanted) in [
        (
            "",
            big.to_owned(),
            "printed more than 67108864 bytes on stdout",
        ),
        (
            "output = \"out.json\"\n",
            format!("{big} > out.json"),
            "test.output out.json holds more than 67108864 bytes",
        ),
    ] {
        let r = Repo::with_values(&["100", "130"], &[]);
        let hunt = r.hunt(extra);
        with_command_line(&hunt, &command);
        let (code, out, err) = run_bounded(&hunt, 300);
        assert_eq!(code, Some(2), "{extra}{out}{err}");
        assert!(err.contains(wanted), "{err}");
        assert!(!err.contains("rerun"), "{err}");
        let runs = r
            .events()
            .into_iter()
            .filter(|e| matches!(e, Event::BootFinished { .. }))
            .count();
        assert_eq!(runs, 0, "{extra}: a run was journalled as the commit's");
    }
}

/// Issue 31 item 1, through the real binary: a regression in two steps (100 → 130 ms at c12,
/// → 160 ms at c28) gives both culprits in one `firstbad run`, the second hunted as the part
/// of the regression the first leaves, in stage `step-2` of the same journal. A `kill -9` in
/// the middle of that stage loses nothing: the rerun takes it up, runs nothing of the first
/// stage again, and ends with both; `status` and the reports show both steps.
#[test]
fn a_regression_in_two_steps_gives_both_culprits_in_one_run_across_a_kill_9() {
    let values: Vec<&str> = (0..40)
        .map(|i| match i {
            0..=11 => "100",
            12..=27 => "130",
            _ => "160",
        })
        .collect();
    let r = Repo::with_values(&values, &[]);
    let hunt = r.hunt("");
    let h = hunt.display().to_string();
    let journal = r.path().join("state/journal.sqlite");
    let stage_events = |stage: &str| -> Vec<Event> {
        if !journal.exists() {
            return Vec::new();
        }
        let j = Journal::open_read_only(&journal)
            .expect("journal")
            .stage(stage);
        j.events()
            .map(|v| v.into_iter().map(|e| e.event).collect())
            .unwrap_or_default()
    };
    // First run: killed once the second step's hunt has finished a run or two.
    let mut child = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["run", &h])
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("firstbad runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let finished = stage_events("step-2")
            .iter()
            .filter(|e| matches!(e, Event::BootFinished { .. }))
            .count();
        if finished >= 2 {
            break;
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended before its second step had begun: {:?}",
            stage_events("")
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no second step in 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let first_stage = stage_events("").len();

    // The rerun: the first stage has ended, the second is taken up where it was.
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        stage_events("").len(),
        first_stage,
        "the first stage ran again: {err}"
    );
    let first = out
        .lines()
        .find_map(|l| l.strip_prefix("first bad commit: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the first step's culprit");
    let second = out
        .lines()
        .find_map(|l| l.strip_prefix("first bad commit of step-2 from "))
        .and_then(|l| l.split_once(": "))
        .and_then(|(_, l)| l.split_whitespace().next())
        .expect("the second step's culprit");
    let mut named = [first, second];
    named.sort_unstable_by_key(|c| r.ids.iter().position(|id| id.starts_with(c)));
    assert_eq!(named, [&r.ids[12][..12], &r.ids[28][..12]], "{out}");
    assert!(
        out.contains("the regression has more than one step"),
        "{out}"
    );
    assert!(!out.contains("NOT confirmed"), "{out}");
    // Both steps in the status, the Markdown and the JSON report.
    let status = firstbad(&["status", &h]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("step 2: the part from"), "{status}");
    let json = firstbad(&["report", &h, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let ids = [
        json["first_bad"]["id"].as_str().unwrap(),
        json["further_steps"][0]["first_bad"]["id"]
            .as_str()
            .unwrap(),
    ];
    assert!(
        ids.contains(&r.ids[12].as_str()) && ids.contains(&r.ids[28].as_str()),
        "{ids:?}"
    );
    let md = firstbad(&["report", &h, "--format", "markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("# Step 2: the part of the regression"), "{md}");
    // Issue 34, "each alone and all together": both culprits reverted together on top of
    // bad (c28 first, then c12: VALUE back to 100) recover all of the regression, read with
    // the first stage's baselines in a stage of their own; c12 alone does not apply on top of
    // bad (c28 rewrote its line), and says so.
    assert!(
        out.contains("reverted together on top: revert of "),
        "{out}{err}"
    );
    assert_eq!(json["reverted_together"]["recovers"], "all", "{json}");
    let together: Vec<&str> = std::iter::once(&json["reverted_together"]["culprit"])
        .chain(json["reverted_together"]["with"].as_array().unwrap())
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(together.len(), 2, "{json}");
    assert!(
        together.contains(&r.ids[12].as_str()) && together.contains(&r.ids[28].as_str()),
        "{together:?}"
    );
    let boots = stage_events(firstbad::hunt::steps::TOGETHER)
        .iter()
        .filter(|e| matches!(e, Event::BootFinished { .. }))
        .count();
    assert!(
        (3..=30).contains(&boots),
        "the revert's rounds: {boots} runs"
    );
    assert!(
        stage_events(firstbad::hunt::steps::TOGETHER)
            .iter()
            .all(|e| !matches!(e, Event::BaselinesConfirmed { .. })),
        "the together stage measured baselines of its own"
    );
    assert!(md.contains("# The culprits reverted together"), "{md}");
    assert!(
        status.contains("the culprits reverted together:"),
        "{status}"
    );
    let alone = [&json["revert"], &json["further_steps"][0]["revert"]];
    let c12 = alone
        .iter()
        .find(|v| v["culprit"] == r.ids[12].as_str())
        .expect("c12 reverted alone");
    if c12["onto"] == r.ids[39].as_str() {
        assert_eq!(c12["conflicts"], serde_json::json!(["VALUE"]), "{c12}");
    }
    // An ended run answers from its journal, both steps, and runs nothing.
    let events = stage_events("step-2").len();
    let (code, again, _) = run(&hunt);
    assert_eq!((code, again.as_str()), (0, out.as_str()));
    assert_eq!(stage_events("step-2").len(), events);
}

/// Issue 61, finding 2: a command printing 1,000,000 values a run (14 MB, inside the 64 MiB
/// read) took `firstbad run` to 989 MB of memory and the journal to 104 MB in 18 runs;
/// `report --format json` then took 814 s. A run keeps its value (the mean of ALL its values,
/// so verdicts do not change) and at most `KEPT_SAMPLES` of them, evenly spaced; the reports
/// say how many of how many. Runs of 50,000 values here (12 times the bound, the same code
/// path): a million a run took this test 133 s of the fast tier; at 5,000 or 50,000 it takes
/// about 50 s on a loaded machine, spent past the bound (not yet looked into).
#[test]
fn a_run_of_a_million_values_keeps_a_bounded_sample_and_the_reports_say_so() {
    let values: Vec<&str> = (0..6).map(|i| if i >= 3 { "130" } else { "100" }).collect();
    let r = Repo::with_files(&values, &[], |_, repo| {
        std::fs::write(
            repo.join("bench.sh"),
            "#!/bin/sh\nawk -v v=\"$(cat VALUE)\" -v r=\"${FIRSTBAD_RUN:-0}\" 'BEGIN { for (i = 0; \
             i < 50000; i++) printf \"{\\\"ms\\\": %d.%d}\\n\", v, (i + r) % 7 }'\n",
        )
        .unwrap();
    });
    let hunt = r.hunt("");
    let (code, out, err) = run(&hunt);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("first bad commit: {}", &r.ids[3][..12])),
        "{out}"
    );
    let runs: usize = r.ids.iter().map(|c| r.runs_of(c).len()).sum();
    let journal: u64 = std::fs::read_dir(r.path().join("state"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("journal.sqlite")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum();
    // 4096 values of a run as JSON are about 30 KB; before, 5.8 MB for a million.
    assert!(
        journal < 100_000 * runs as u64 + 1_000_000,
        "the journal holds {journal} bytes after {runs} runs"
    );
    // Every run's value is the mean of all its values: 100.3 or 130.3, whatever was kept.
    for c in &r.ids {
        for o in r.runs_of(c) {
            let BootOutcome::Measured { value, result, .. } = o else {
                panic!("a failed run: {o:?}")
            };
            let tenths = (value * 10.0).round();
            assert!(
                tenths == 1003.0 || tenths == 1303.0,
                "a run's value {value}"
            );
            let series = &result.series["ms"];
            assert_eq!(series.samples.len(), firstbad::metric::KEPT_SAMPLES);
            assert_eq!(series.count, Some(50_000));
        }
    }
    for format in ["json", "markdown", "html"] {
        let out = firstbad(&["report", &hunt.display().to_string(), "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("kept 4,096 of 50,000 samples"),
            "{format}: {}",
            text.chars().take(3000).collect::<String>()
        );
    }
}
