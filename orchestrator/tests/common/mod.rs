//! Helpers shared by the integration tests that drive real git.

// Each test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs git in `dir`, hermetic: no system or user config, fixed identity, no stdin.
pub fn git(dir: &Path, args: &[&str]) -> Output {
    git_env(dir, args, &[])
}

/// [`git`] with more environment, e.g. `GIT_AUTHOR_DATE` for a history made the same each time.
pub fn git_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .stdin(Stdio::null())
        .output()
        .expect("git runs")
}

/// [`git`], asserting success; returns stdout as it is.
pub fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`git_ok`], trimmed: for commands that print one value (an id, a subject).
pub fn git_str(dir: &Path, args: &[&str]) -> String {
    git_ok(dir, args).trim().to_owned()
}

pub mod dag;

/// Runs headless Chromium on `html`; returns (DOM, stderr). Panics with the fix when
/// Chromium is missing, unless FIRSTBAD_NO_BROWSER is set (then `None`).
pub fn chromium(args: &[&str], html: &Path) -> Option<(String, String)> {
    let exe = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(exe) = exe else {
        if std::env::var_os("FIRSTBAD_NO_BROWSER").is_some() {
            return None;
        }
        panic!(
            "chromium is not installed: run scripts/install-deps (or set FIRSTBAD_NO_BROWSER=1)"
        );
    };
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium runs");
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
