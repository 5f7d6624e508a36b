//! Telling people: a mail and a webhook when a regression is detected, when its hunt ends, and
//! when heads have failed for `failure_nights` nights in a row. Each is journalled once sent
//! (`notified`); one that failed on every channel is tried again by the next cycle.

use super::db::{Change, SeriesDb, SeriesEvent, SeriesState};
use super::reports::hunt_reports;
use super::{describe, Cycle, WatchError};
use crate::config::SeriesConfig;
use crate::hunt::short;
use crate::notify::{self, Event, Message};

/// Sends what is due and journals what was sent.
pub async fn tell(
    cfg: &SeriesConfig,
    db: &mut SeriesDb,
    out: &mut Cycle,
) -> Result<(), WatchError> {
    let failed = db.state.failed_in_a_row();
    if failed >= cfg.failure_nights {
        let last = db.state.nights.last().map_or(0, |n| n.night);
        if !db.state.failure_alerts.contains(&last) {
            db.record(SeriesEvent::FailureAlert {
                night: last,
                nights: failed,
            })?;
            out.say(format!(
                "alert: the head has failed to build or boot {failed} nights in a row"
            ));
        }
    }
    let Some(ncfg) = cfg.notify.clone() else {
        return Ok(());
    };
    let mut due: Vec<(Option<u32>, &'static str, Message)> = Vec::new();
    for c in db
        .state
        .changes
        .iter()
        .filter(|c| c.regression && !c.acknowledged)
    {
        if !c.told.iter().any(|t| t == "detected") {
            due.push((Some(c.id), "detected", detected(cfg, c)));
        }
        if c.outcome.is_some() && !c.told.iter().any(|t| t == "culprit") {
            due.push((Some(c.id), "culprit", ended(cfg, c)?));
        }
    }
    if let Some(&night) = db.state.failure_alerts.last() {
        if !db.state.failures_told.contains(&night) {
            due.push((None, "failures", failures(cfg, &db.state, night)));
        }
    }
    for (id, what, msg) in due {
        let sent = notify::send(&ncfg, &msg).await;
        let mut results = Vec::new();
        if let Some(r) = &sent.email {
            results.push(match r {
                Ok(s) => format!("mail sent: {}", s.message_id),
                Err(e) => format!("mail: {e}"),
            });
        }
        if let Some(r) = &sent.webhook {
            results.push(match r {
                Ok(s) => format!("webhook: HTTP {}", s.status),
                Err(e) => format!("webhook: {e}"),
            });
        }
        let any = sent.email.as_ref().is_some_and(|r| r.is_ok())
            || sent.webhook.as_ref().is_some_and(|r| r.is_ok());
        out.say(format!("told ({what}): {}", results.join("; ")));
        if any {
            db.record(SeriesEvent::Notified {
                id,
                what: what.into(),
                results,
            })?;
        }
    }
    Ok(())
}

/// The thread a regression's mails share.
fn thread(cfg: &SeriesConfig, c: &Change) -> String {
    format!("{}-regression-{}", cfg.name, c.id)
}

/// The metric a change is judged on.
fn metric<'a>(cfg: &'a SeriesConfig, c: &'a Change) -> &'a str {
    if c.metric.is_empty() {
        cfg.metric()
    } else {
        &c.metric
    }
}

fn detected(cfg: &SeriesConfig, c: &Change) -> Message {
    let metric = metric(cfg, c);
    let subject = format!(
        "[firstbad] {}: {metric} {:+.0}% since night {}",
        cfg.name,
        c.effect * 100.0,
        c.night
    );
    let body = format!(
        "{subject}\n\nThe series {} follows {} of {}.\n\nNight {}: {}\n\nLast commit before: \
         {}\nFirst commit after: {}\n\nfirstbad is hunting the first bad commit between them; \
         a second mail follows with its culprit.\n",
        cfg.name, cfg.branch, cfg.remote, c.night, c.summary, c.good, c.bad
    );
    Message {
        event: Event::RegressionDetected,
        json: serde_json::json!({
            "series": cfg.name, "regression": c.id, "night": c.night, "metric": metric,
            "effect": c.effect, "good": c.good, "bad": c.bad, "summary": c.summary,
        }),
        subject,
        body,
        thread: Some(thread(cfg, c)),
    }
}

fn ended(cfg: &SeriesConfig, c: &Change) -> Result<Message, WatchError> {
    let outcome = c.outcome.as_ref().expect("an ended hunt");
    let found = matches!(outcome, super::db::RegressionState::Found { .. });
    let subject = format!(
        "[firstbad] {}: {} {:+.0}% since night {}: {}",
        cfg.name,
        metric(cfg, c),
        c.effect * 100.0,
        c.night,
        describe(outcome)
    );
    let hunt = super::hunt_of(cfg, c);
    let (report, json) = match hunt_reports(&hunt)? {
        Some(r) => (
            format!("{}\nHTML report: {}\n", r.email, r.html.display()),
            r.json,
        ),
        None => (String::new(), serde_json::Value::Null),
    };
    Ok(Message {
        event: if found {
            Event::CulpritFound
        } else {
            Event::HuntEnded
        },
        body: format!(
            "{subject}\n\nThe hunt between {} and {} ended: {}.\n\n{report}",
            short(&c.good),
            short(&c.bad),
            describe(outcome)
        ),
        json: serde_json::json!({
            "series": cfg.name, "regression": c.id, "outcome": outcome, "report": json,
        }),
        subject,
        thread: Some(thread(cfg, c)),
    })
}

/// The alert that the head has failed `failure_nights` nights in a row: its own event, no
/// hunt having ended.
fn failures(cfg: &SeriesConfig, state: &SeriesState, night: u32) -> Message {
    let n = state.failed_in_a_row();
    let reasons: Vec<String> = state
        .nights
        .iter()
        .rev()
        .take(n as usize)
        .map(|x| {
            format!(
                "night {}: {}: {}",
                x.night,
                short(&x.head),
                x.failed.as_deref().unwrap_or("")
            )
        })
        .collect();
    let subject = format!(
        "[firstbad] {}: the head has not built or booted for {n} nights",
        cfg.name
    );
    Message {
        event: Event::HeadFailing,
        body: format!("{subject}\n\n{}\n", reasons.join("\n")),
        json: serde_json::json!({"series": cfg.name, "night": night, "failed_nights": n, "reasons": reasons}),
        subject,
        thread: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A series file of the repository's sample kernel tables, loaded.
    fn series(dir: &Path) -> SeriesConfig {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace");
        let path = dir.join("series.toml");
        std::fs::write(
            &path,
            format!(
                "[series]\nname = \"s\"\nremote = \"/srv/git/linux\"\nrepo = \"/tmp/linux\"\n\n\
                 [build]\nconfig = \"{root}/configs/kernel/qemu-x86_64.config\"\n\n\
                 [[hosts]]\nkind = \"qemu\"\n\n[workload]\n\
                 file = \"{root}/workloads/fsync-latency.toml\"\nmetric = \"fsync_latency_p50_ms\"\n",
                root = root.display()
            ),
        )
        .expect("series file");
        SeriesConfig::load(&path).expect("a valid series file")
    }

    /// Issue 32, finding 9: the alert about heads that fail night after night went out as
    /// webhook event `hunt_ended`, though no hunt had run; a receiver routing on the event
    /// filed it under a hunt's end.
    #[test]
    fn the_failing_heads_alert_is_its_own_webhook_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = series(dir.path());
        let mut state = SeriesState::default();
        for night in 1..=3 {
            state.apply(
                &SeriesEvent::NightStarted {
                    night,
                    head: format!("{night:0>40}"),
                    reference: "r".repeat(40),
                },
                0,
            );
            state.apply(
                &SeriesEvent::NightFailed {
                    night,
                    reason: "build failed".into(),
                },
                0,
            );
        }
        let msg = failures(&cfg, &state, 3);
        assert_eq!(msg.event, Event::HeadFailing);
        assert_eq!(notify::payload(&msg, None)["event"], "head_failing");
        assert!(msg.body.contains("night 3: "), "{}", msg.body);
    }
}
