//! Following a LAVA job's log: the agent's lines, the console's verdict, LAVA's own, and the outcome of the boot from them.

use super::*;

/// What following a job has read of it: the agent's lines, the console's verdict, LAVA's own.
pub(super) struct Seen {
    pub(super) decoder: Decoder,
    pub(super) scanner: ConsoleScanner,
    /// The first console line that fails the boot.
    pub(super) fatal: Option<String>,
    /// LAVA's error for the job (its `job` case), if it failed.
    pub(super) job_error: Option<String>,
    /// Why firstbad cancelled the job ("" once the result was in), if it did.
    pub(super) cancelled_by_us: Option<String>,
    pub(super) running_since: Option<Instant>,
    pub(super) agent_at: Option<Instant>,
}

impl Seen {
    pub(super) fn new(token: &str) -> Seen {
        Seen {
            decoder: Decoder::new(token),
            scanner: ConsoleScanner::default(),
            fatal: None,
            job_error: None,
            cancelled_by_us: None,
            running_since: None,
            agent_at: None,
        }
    }

    /// Takes one log line; the text the boot's console log gets for it, if any.
    pub(super) fn take(&mut self, l: &LogLine) -> Option<String> {
        match l {
            LogLine::Target(text) => {
                self.decoder.line(text);
                if text.contains("firstbad-init: starting agent") && self.agent_at.is_none() {
                    self.agent_at = Some(Instant::now());
                }
                if self.fatal.is_none() {
                    self.fatal = self.scanner.line(text);
                }
                Some(text.clone())
            }
            LogLine::JobResult(why) => {
                self.job_error = why.clone();
                None
            }
            LogLine::Other(lvl, text) if lvl == "error" || lvl == "exception" => {
                Some(format!("[lava:{lvl}] {text}"))
            }
            LogLine::Other(..) => None,
        }
    }

    /// What a finished job means for the hunt.
    pub(super) fn outcome(&self, b: &FarmBoot<'_>, id: &str, info: &JobInfo) -> BootOutcome {
        let failed = |reason: String| BootOutcome::Failed {
            reason,
            console: b.console.to_owned(),
            untestable: false,
        };
        if let Some(f) = &self.fatal {
            return failed(format!("boot failed: {f} (LAVA job {id})"));
        }
        let identity = self.decoder.identity();
        if let Some(idn) = identity {
            if idn.kernel_release != b.release {
                return failed(format!(
                    "wrong kernel: the agent reports {:?}, expected {:?} (LAVA job {id})",
                    idn.kernel_release, b.release
                ));
            }
        }
        match (self.decoder.outcome(), identity) {
            (Some(Ok(result)), Some(idn)) => match crate::hosts::metric_value(&result, b.metric) {
                Ok(value) => BootOutcome::Measured {
                    kernel_release: idn.kernel_release.clone(),
                    boot_id: idn.boot_id.clone(),
                    value,
                    console: b.console.to_owned(),
                    boot_seconds: match (self.running_since, self.agent_at) {
                        (Some(r), Some(a)) => a.saturating_duration_since(r).as_secs_f64(),
                        _ => 0.0,
                    },
                    result,
                },
                Err(reason) => failed(reason),
            },
            (Some(Err(why)), _) => failed(format!("workload failed: {why} (LAVA job {id})")),
            _ => {
                let comment = info
                    .failure_comment
                    .as_deref()
                    .map(|c| format!("; {}", clip(c)))
                    .unwrap_or_default();
                failed(match (info.health.as_str(), &self.cancelled_by_us) {
                    (_, Some(why)) if !why.is_empty() => why.clone(),
                    ("Canceled", _) => {
                        format!("LAVA job {id} was canceled on the farm, not by firstbad{comment}")
                    }
                    ("Complete", _) => {
                        format!("LAVA job {id} ended Complete but the agent printed no result")
                    }
                    (health, _) => format!(
                        "LAVA job {id} ended {health}: {}{comment}",
                        self.job_error.as_deref().unwrap_or("no reason given")
                    ),
                })
            }
        }
    }
}

/// Writes a job's console log, line by line.
pub(super) struct Say<'a>(pub(super) &'a mut tokio::fs::File);

impl Say<'_> {
    pub(super) async fn line(&mut self, text: &str) {
        let _ = self.0.write_all(text.as_bytes()).await;
        let _ = self.0.write_all(b"\n").await;
        let _ = self.0.flush().await;
    }
}

/// One line of a LAVA job log.
#[derive(Debug, PartialEq)]
pub(super) enum LogLine {
    /// The device's console (`lvl: target`).
    Target(String),
    /// LAVA's own verdict on the job (the `job` case of suite `lava`): `None` for a pass,
    /// else its error type and message.
    JobResult(Option<String>),
    /// Anything else: its level and text.
    Other(String, String),
}

/// A job log as `GET /jobs/<id>/logs/` sends it: YAML, one flow mapping a line
/// (`- {"dt": …, "lvl": …, "msg": …}`), which is JSON after the dash.
pub(super) fn parse_log(body: &str) -> Vec<LogLine> {
    body.lines()
        .filter_map(|l| {
            let json = l.trim_start().strip_prefix("- ")?;
            let v: serde_json::Value = serde_json::from_str(json).ok()?;
            let lvl = v["lvl"].as_str().unwrap_or("").to_owned();
            let msg = &v["msg"];
            Some(match (lvl.as_str(), msg) {
                ("target" | "feedback", serde_json::Value::String(s)) => LogLine::Target(s.clone()),
                ("results", m) if m["definition"] == "lava" && m["case"] == "job" => {
                    LogLine::JobResult(match m["result"].as_str() {
                        Some("pass") => None,
                        _ => Some(format!(
                            "{}: {}",
                            m["error_type"].as_str().unwrap_or("error"),
                            m["error_msg"].as_str().map(clip).unwrap_or_default()
                        )),
                    })
                }
                (_, serde_json::Value::String(s)) => LogLine::Other(lvl, s.clone()),
                (_, m) => LogLine::Other(lvl, m.to_string()),
            })
        })
        .collect()
}

/// At most 300 characters of a server's text, on one line.
pub(super) fn clip(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}
