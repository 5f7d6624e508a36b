//! `[notify.webhook]`: the URL, its headers (a secret one only from the environment), TLS and retries.

use super::*;

pub(super) fn webhook(v: &V, raw: RawWebhook) -> Result<WebhookConfig, ConfigError> {
    let url = raw.url.ok_or_else(|| {
        v.field(
            "notify.webhook.url",
            "missing: give the address to POST to, e.g. url = \"https://hooks.example.org/firstbad\"",
        )
    })?;
    let url =
        crate::config::url::checked_url(&url, crate::config::url::Carries::Secret("the report"))
            .map_err(|why| v.field("notify.webhook.url", why))?;
    let mut headers = Vec::new();
    if let Some(var) = raw.bearer_token_env {
        let field = "notify.webhook.bearer_token_env";
        headers.push(WebhookHeader {
            name: reqwest::header::AUTHORIZATION,
            value: HeaderSource::Env {
                var: env_var(v, field, &var, "the bearer token")?,
                prefix: "Bearer ",
            },
            field: field.into(),
        });
    }
    for (name, value) in &raw.headers {
        let field = format!("notify.webhook.headers.{name}");
        let name = header_name(v, &field, name, &headers)?;
        if let Some(word) = secret_word(&name) {
            return Err(v.field(
                &field,
                format!(
                    "looks like a secret (its name holds {word:?}), which is never read from \
                     the series file: use bearer_token_env, or name an environment variable in \
                     headers_env (e.g. headers_env = {{ {} = \"HOOK_SECRET\" }})",
                    name.as_str()
                ),
            ));
        }
        let value = HeaderValue::from_str(value).map_err(|_| {
            v.field(
                &field,
                format!(
                    "{} cannot be a header value (control characters?)",
                    snippet(value)
                ),
            )
        })?;
        headers.push(WebhookHeader {
            name,
            value: HeaderSource::Text(value),
            field,
        });
    }
    for (name, var) in &raw.headers_env {
        let field = format!("notify.webhook.headers_env.{name}");
        let name = header_name(v, &field, name, &headers)?;
        headers.push(WebhookHeader {
            name,
            value: HeaderSource::Env {
                var: env_var(v, &field, var, "the header's value")?,
                prefix: "",
            },
            field,
        });
    }
    let ca_file = match raw.ca_file {
        Some(_) if url.scheme() == "http" => {
            return Err(v.field(
                "notify.webhook.ca_file",
                "is unused with an http URL: remove it, or use https",
            ))
        }
        Some(f) => Some(ca_file(v, "notify.webhook.ca_file", &f)?),
        None => None,
    };
    Ok(WebhookConfig {
        url,
        headers,
        ca_file,
        timeout: timeout(v, "notify.webhook.timeout_s", raw.timeout_s)?,
        attempts: attempts(v, "notify.webhook.attempts", raw.attempts)?,
    })
}

/// Words in a header's name that say its value is a secret, whatever the service calls it
/// (`Authorization`, `Proxy-Authorization`, `X-Auth-Key`, `X-Gitlab-Token`, `X-Api-Key`,
/// `Cookie`, `X-Client-Secret`, `X-Password`): such a value comes from the environment, never
/// from the series file (issue 32, finding 7). Header names are lower case here.
const SECRET_WORDS: [&str; 9] = [
    "auth",
    "token",
    "secret",
    "passw",
    "api-key",
    "apikey",
    "api_key",
    "cookie",
    "credential",
];

/// The word of [`SECRET_WORDS`] that `name` holds, if any.
pub(super) fn secret_word(name: &HeaderName) -> Option<&'static str> {
    SECRET_WORDS.into_iter().find(|w| name.as_str().contains(w))
}

/// A header name from the file: valid, not one firstbad sets itself, not given twice.
pub(super) fn header_name(
    v: &V,
    field: &str,
    name: &str,
    seen: &[WebhookHeader],
) -> Result<HeaderName, ConfigError> {
    let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        v.field(
            field,
            format!(
                "{} is not a header name: use letters, digits and '-'",
                snippet(name)
            ),
        )
    })?;
    use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, TRANSFER_ENCODING};
    if [CONTENT_TYPE, CONTENT_LENGTH, HOST, TRANSFER_ENCODING].contains(&parsed) {
        return Err(v.field(
            field,
            format!("{} is set by firstbad itself: remove it", snippet(name)),
        ));
    }
    if let Some(other) = seen.iter().find(|h| h.name == parsed) {
        return Err(v.field(
            field,
            format!(
                "{} is already set by {}: keep one",
                snippet(name),
                other.field
            ),
        ));
    }
    Ok(parsed)
}
