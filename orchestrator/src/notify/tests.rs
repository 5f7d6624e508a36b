//! The pure parts of notify: Message-IDs, the payload, the backoff. The delivery itself is
//! tested against real servers in `tests/notify.rs`.

use super::*;
use std::path::Path;

fn email_cfg() -> EmailConfig {
    let table: toml::Value = toml::from_str(
        r#"
        [email]
        server = "127.0.0.1"
        tls = "none"
        from = "firstbad <firstbad@lab.example.org>"
        to = "maintainer@example.org"
        "#,
    )
    .expect("test TOML parses");
    parse(Path::new("series.toml"), &table)
        .expect("valid")
        .email
        .expect("email set")
}

fn msg(event: Event, thread: Option<&str>) -> Message {
    Message {
        event,
        subject: "s".into(),
        body: "b".into(),
        json: serde_json::json!({"k": 1}),
        thread: thread.map(str::to_owned),
    }
}

#[test]
fn the_detection_mail_is_the_root_of_its_thread_and_the_same_every_time() {
    let cfg = email_cfg();
    let m = msg(
        Event::RegressionDetected,
        Some("fsync-nightly/p99/2026-12-01"),
    );
    let id = message_id(&cfg, &m);
    assert_eq!(id, message_id(&cfg, &m));
    assert_eq!(id, thread_root_id(&cfg, "fsync-nightly/p99/2026-12-01"));
    assert!(
        id.starts_with("<firstbad.fsync-nightly-p99-2026-12-01."),
        "{id}"
    );
    assert!(id.ends_with("@lab.example.org>"), "{id}");
}

#[test]
fn names_that_differ_only_in_replaced_characters_get_different_ids() {
    let cfg = email_cfg();
    assert_ne!(thread_root_id(&cfg, "a/b"), thread_root_id(&cfg, "a:b"));
    assert_eq!(
        thread_root_id(&cfg, "plain-name_1"),
        "<firstbad.plain-name_1@lab.example.org>"
    );
    let long = "x".repeat(500);
    assert!(thread_root_id(&cfg, &long).len() < 120);
}

#[test]
fn later_mails_get_unique_ids() {
    let cfg = email_cfg();
    let m = msg(Event::CulpritFound, Some("t"));
    assert_ne!(message_id(&cfg, &m), message_id(&cfg, &m));
    assert_ne!(message_id(&cfg, &m), thread_root_id(&cfg, "t"));
}

#[test]
fn the_payload_wraps_the_report_with_event_subject_and_thread() {
    let m = msg(Event::CulpritFound, Some("t"));
    let p = payload(&m, Some("<id@x>"));
    assert_eq!(p["schema"], PAYLOAD_SCHEMA);
    assert_eq!(p["event"], "culprit_found");
    assert_eq!(p["subject"], "s");
    assert_eq!(p["thread"], "t");
    assert_eq!(p["message_id"], "<id@x>");
    assert_eq!(p["text"], "b");
    assert_eq!(p["report"], serde_json::json!({"k": 1}));
    assert_eq!(
        payload(&msg(Event::HuntEnded, None), None)["thread"],
        serde_json::Value::Null
    );
}

#[test]
fn backoff_doubles_from_one_second_and_stays_bounded() {
    let waits: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
}

/// Issue 32, finding 4: a 100 KB subject without a space was a 100 KB `Subject:` line (lettre
/// folds a header at its spaces only; RFC 5322 allows 998 characters a line).
#[test]
fn a_100_kb_subject_is_cut_to_one_short_header_line() {
    let cfg = email_cfg();
    let mut m = msg(Event::CulpritFound, Some("t"));
    m.subject = format!("[firstbad] s: {}\r\nBcc: x@y.z", "x".repeat(100_000));
    let mail = email::build(&cfg, &m, "<id@lab.example.org>").expect("a mail");
    let text = String::from_utf8(mail.formatted()).expect("ASCII headers");
    for line in text.split("\r\n") {
        assert!(line.len() <= 998, "a line of {} bytes", line.len());
    }
    let subject = text
        .split("\r\n")
        .find(|l| l.starts_with("Subject: "))
        .expect("a Subject header");
    // The cut's "…" makes its word an encoded one; the words before it stay as they were.
    assert!(subject.starts_with("Subject: [firstbad] s: "), "{subject}");
    assert!(!text.contains("\r\nBcc:"), "{text}");
}
