//! The webhook: one JSON POST (reqwest, rustls), retried on no answer, 408, 429 and 5xx.
//!
//! The body is the envelope [`payload`] makes around [`Message::json`]; its schema is in
//! `docs/notify.md`.

use super::config::pem_has_certificate;
use super::{
    chain, retrying, Attempt, HeaderSource, Message, NotifyError, WebhookConfig, WebhookSent,
};
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};

/// The `schema` field of every payload; bumped when a field changes meaning or goes away.
pub const PAYLOAD_SCHEMA: &str = "firstbad-notify/1";

/// Longest part of an error answer's body quoted in a [`NotifyError`], in characters.
const ANSWER_CHARS: usize = 200;

/// Most of an error answer's body read: room for a proxy's HTML error page, far below what a
/// receiver gone wrong can send (a 200 MB 500 answer, read whole, took `watch` to 686 MB;
/// issue 32, finding 5). The rest is never read: the connection is dropped.
const ANSWER_BYTES: usize = 64 << 10;

/// The JSON body POSTed for `msg`: `schema`, `event`, `subject`, `thread`, `message_id`
/// (of the mail about the same news, or null), `text` (the e-mail
/// body) and `report` (`msg.json`, unchanged).
pub fn payload(msg: &Message, message_id: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "schema": PAYLOAD_SCHEMA,
        "event": msg.event,
        "subject": msg.subject,
        "thread": msg.thread,
        "message_id": message_id,
        "text": msg.body,
        "report": msg.json,
    })
}

/// POSTs the payload, retrying transient failures; each attempt is bounded by `cfg.timeout`.
pub(super) async fn send(
    cfg: &WebhookConfig,
    msg: &Message,
    message_id: Option<&str>,
) -> Result<WebhookSent, NotifyError> {
    let url = cfg.url.to_string();
    let target = format!("webhook {url}");
    let client = client(cfg, &target)?;
    let headers = headers(cfg, &target)?;
    let body = serde_json::to_vec(&payload(msg, message_id)).map_err(|e| NotifyError::Message {
        target: target.clone(),
        message: e.to_string(),
    })?;
    let timeout_s = cfg.timeout.as_secs();
    let result = retrying(cfg.attempts, |_| {
        let request = client
            .post(cfg.url.clone())
            .headers(headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone());
        async move {
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    let what = transport_error(&e, timeout_s);
                    // A certificate the roots (and ca_file) do not vouch for stays so.
                    return if what.contains("certificate") {
                        Attempt::Fail(format!(
                            "{what} (a private CA? name its PEM file in notify.webhook.ca_file)"
                        ))
                    } else {
                        Attempt::Retry(what)
                    };
                }
            };
            let status = response.status();
            if status.is_success() {
                return Attempt::Ok(status.as_u16());
            }
            let answer = match answer_start(response).await {
                Ok(t) => t.chars().take(ANSWER_CHARS).collect::<String>(),
                Err(e) => format!("(answer unreadable: {})", transport_error(&e, timeout_s)),
            };
            let answer = answer.split_whitespace().collect::<Vec<_>>().join(" ");
            let what = format!("HTTP {status}: {answer}");
            let code = status.as_u16();
            // 408 and 429 ask to come back later; 5xx is the receiver's trouble, often
            // passing (a restart, a proxy's 502). Other answers will not change.
            if code == 408 || code == 429 || status.is_server_error() {
                Attempt::Retry(what)
            } else if status.is_redirection() {
                Attempt::Fail(format!(
                    "{what} (redirects are not followed: set notify.webhook.url to the final address)"
                ))
            } else {
                Attempt::Fail(what)
            }
        }
    })
    .await;
    match result {
        Ok((status, attempts)) => {
            tracing::info!(%url, status, attempts, "webhook called");
            Ok(WebhookSent {
                url,
                status,
                attempts,
            })
        }
        Err((message, attempts)) => Err(NotifyError::Webhook {
            status: message
                .strip_prefix("HTTP ")
                .and_then(|s| s.get(..3))
                .and_then(|s| s.parse().ok()),
            url,
            message,
            attempts,
        }),
    }
}

/// The first [`ANSWER_BYTES`] of an answer's body, as text (a character cut at the bound
/// becomes U+FFFD).
async fn answer_start(mut response: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut bytes = Vec::new();
    while bytes.len() < ANSWER_BYTES {
        let Some(chunk) = response.chunk().await? else {
            break;
        };
        let room = ANSWER_BYTES - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn transport_error(e: &reqwest::Error, timeout_s: u64) -> String {
    if e.is_timeout() {
        format!("no answer within {timeout_s} s (notify.webhook.timeout_s)")
    } else {
        chain(e)
    }
}

fn client(cfg: &WebhookConfig, target: &str) -> Result<reqwest::Client, NotifyError> {
    let mut b = reqwest::Client::builder()
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout)
        // A 301/302 would turn the POST into a GET and drop the payload.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("firstbad/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &cfg.ca_file {
        let err = |message: String| NotifyError::CaFile {
            target: target.to_owned(),
            path: path.clone(),
            message,
        };
        let pem = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        if !pem_has_certificate(&pem) {
            return Err(err("holds no PEM certificate".into()));
        }
        for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| err(chain(&e)))? {
            b = b.add_root_certificate(cert);
        }
    }
    b.build().map_err(|e| NotifyError::Message {
        target: target.to_owned(),
        message: format!("HTTP client: {}", chain(&e)),
    })
}

/// The configured headers, secrets read from the environment now.
fn headers(cfg: &WebhookConfig, target: &str) -> Result<HeaderMap, NotifyError> {
    let mut map = HeaderMap::new();
    for h in &cfg.headers {
        let value = match &h.value {
            HeaderSource::Text(v) => v.clone(),
            HeaderSource::Env { var, prefix } => {
                let missing = || NotifyError::MissingEnv {
                    target: target.to_owned(),
                    var: var.clone(),
                    field: h.field.clone(),
                };
                let value = std::env::var(var)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(missing)?;
                let mut v = HeaderValue::from_str(&format!("{prefix}{value}")).map_err(|_| {
                    NotifyError::Message {
                        target: target.to_owned(),
                        message: format!(
                            "environment variable {var} ({}) holds characters a header \
                             cannot carry",
                            h.field
                        ),
                    }
                })?;
                v.set_sensitive(true);
                v
            }
        };
        map.insert(h.name.clone(), value);
    }
    Ok(map)
}
