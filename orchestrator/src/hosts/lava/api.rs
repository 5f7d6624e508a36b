//! LAVA's REST API (v0.2) as the farm host calls it: calls retried while the server is away, jobs found, submitted, cancelled, their logs read, and room for a job among the usable devices.

use super::*;

impl LavaHost {
    pub(super) fn api(&self, path: &str) -> String {
        format!("{}/api/v0.2/{path}", self.cfg.server)
    }

    pub(super) fn authed(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.token.get() {
            Some(t) => rb.header("Authorization", format!("Token {t}")),
            None => rb,
        }
    }

    /// One call: its status and body, or why there is none.
    pub(super) async fn call(&self, rb: reqwest::RequestBuilder) -> Result<(u16, String), Away> {
        let r = self
            .authed(rb)
            .send()
            .await
            .map_err(|e| Away(format!("{e}")))?;
        let status = r.status().as_u16();
        let body = r
            .text()
            .await
            .map_err(|e| Away(format!("reading the answer: {e}")))?;
        if status >= 500 || status == 429 {
            // gunicorn restarting, a proxy in front of it: the server is away.
            return Err(Away(format!("HTTP {status}")));
        }
        Ok((status, body))
    }

    /// A call retried while the server is away, with doubling waits, until
    /// `server_deadline_s` has passed since its first failure.
    pub(super) async fn call_retrying<F>(
        &self,
        what: &str,
        make: F,
    ) -> Result<(u16, String), HostError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let first = Instant::now();
        let deadline = Duration::from_secs(self.cfg.server_deadline_s);
        let mut wait = Duration::from_secs(1);
        loop {
            match self.call(make()).await {
                Ok(answer) => return Ok(answer),
                Err(Away(why)) => {
                    let waited = first.elapsed();
                    if waited >= deadline {
                        return Err(self.server_gone(what, waited, &why));
                    }
                    tracing::warn!(
                        host = %self.name,
                        "LAVA server {} does not answer ({why}) while {what}; trying again in {} s",
                        self.cfg.server,
                        wait.as_secs()
                    );
                    crate::exec::kernel::status(&format!(
                        "LAVA server away for {} s: {why}",
                        waited.as_secs()
                    ));
                    tokio::time::sleep(wait.min(deadline.saturating_sub(waited))).await;
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// The server has not answered for longer than `server_deadline_s`.
    pub(super) fn server_gone(&self, what: &str, waited: Duration, why: &str) -> HostError {
        self.needs_person(
            what,
            &format!(
                "the LAVA server {} has not answered for {} s (hosts.server_deadline_s = {}): {why}",
                self.cfg.server,
                waited.as_secs(),
                self.cfg.server_deadline_s
            ),
        )
    }

    pub(super) fn needs_person(&self, what: &str, why: &str) -> HostError {
        HostError::NeedsPerson {
            host: self.name.clone(),
            why: format!("{what}: {why}"),
        }
    }

    /// The job, or `None` if the server does not know it.
    pub(super) async fn job(&self, id: &str) -> Result<Option<JobInfo>, HostError> {
        let url = self.api(&format!("jobs/{id}/"));
        let (status, body) = self
            .call_retrying(&format!("reading LAVA job {id}"), || self.http.get(&url))
            .await?;
        match status {
            200 => serde_json::from_str(&body).map(Some).map_err(|e| {
                self.needs_person(
                    &format!("reading LAVA job {id}"),
                    &format!("an answer firstbad cannot read ({e}): {}", clip(&body)),
                )
            }),
            404 => Ok(None),
            _ => Err(self.needs_person(
                &format!("reading LAVA job {id}"),
                &format!("HTTP {status}: {}", clip(&body)),
            )),
        }
    }

    /// The newest job whose definition holds `token`, if any.
    pub(super) async fn find(&self, token: &str) -> Result<Option<String>, HostError> {
        let url = self.api("jobs/");
        let (status, body) = self
            .call_retrying("looking for a job by its token", || {
                self.http.get(&url).query(&[
                    ("original_definition__contains", token),
                    ("ordering", "-id"),
                    ("limit", "1"),
                ])
            })
            .await?;
        if status != 200 {
            return Err(self.needs_person(
                "looking for a job by its token",
                &format!("HTTP {status}: {}", clip(&body)),
            ));
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        Ok(v["results"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|j| j["id"].as_i64())
            .map(|id| id.to_string()))
    }

    /// Submits `definition`; the job's id. A submission whose answer was lost (the server
    /// went away mid-call) is looked for by its token before it is sent again.
    pub(super) async fn submit(&self, definition: &str, token: &str) -> Result<String, HostError> {
        let url = self.api("jobs/");
        let body = serde_json::json!({ "definition": definition });
        let first = Instant::now();
        let mut wait = Duration::from_secs(1);
        loop {
            match self.call(self.http.post(&url).json(&body)).await {
                Ok((201, answer)) => {
                    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
                    return v["job_ids"][0]
                        .as_i64()
                        .map(|id| id.to_string())
                        .ok_or_else(|| {
                            self.needs_person(
                                "submitting a job",
                                &format!("an answer without a job id: {}", clip(&answer)),
                            )
                        });
                }
                Ok((status @ (401 | 403), answer)) => {
                    return Err(self.needs_person(
                        "submitting a job",
                        &format!(
                            "the server refused the token (HTTP {status}: {}): check {}",
                            clip(&answer),
                            match &self.cfg.token {
                                LavaToken::File(f) => format!("token_file {}", f.display()),
                                LavaToken::Env(v) => format!("token_env {v}"),
                            }
                        ),
                    ))
                }
                Ok((status, answer)) => {
                    return Err(self.needs_person(
                        "submitting a job",
                        &format!(
                            "HTTP {status}: {} (device_type {:?}, tags {:?})",
                            clip(&answer),
                            self.cfg.device_type,
                            self.cfg.tags
                        ),
                    ))
                }
                Err(Away(why)) => {
                    if let Ok(Some(id)) = self.find(token).await {
                        return Ok(id);
                    }
                    let waited = first.elapsed();
                    if waited.as_secs() >= self.cfg.server_deadline_s {
                        return Err(self.server_gone("submitting a job", waited, &why));
                    }
                    tracing::warn!(host = %self.name, "LAVA server does not take the job ({why}); trying again in {} s", wait.as_secs());
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Cancels the job an earlier run left for a boot the hunt no longer needs.
    pub async fn cancel_left_over(&self, left: &Checkpoint) {
        let Some(record) = JobMark::of(left, &self.name) else {
            return;
        };
        let id = match &record.job {
            Some(id) => Some(id.clone()),
            None => self.find(&record.token).await.ok().flatten(),
        };
        if let Some(id) = id {
            if let Ok(Some(info)) = self.job(&id).await {
                if info.state != "Finished" {
                    tracing::info!(host = %self.name, "cancelling LAVA job {id}: left by an earlier run, no longer needed");
                    self.cancel(&id).await;
                }
            }
        }
    }

    /// Devices the jobs can run on: of the device type, carrying every tag, in health Good or
    /// Unknown (Maintenance, Bad, Looping and Retired ones take no jobs).
    pub(super) async fn usable_devices(&self) -> Result<usize, HostError> {
        let what = "counting the farm's devices";
        let url = self.api("devices/");
        let (status, body) = self
            .call_retrying(what, || {
                self.http.get(&url).query(&[
                    ("device_type", self.cfg.device_type.as_str()),
                    ("limit", "1000"),
                ])
            })
            .await?;
        if status != 200 {
            return Err(self.needs_person(what, &format!("HTTP {status}: {}", clip(&body))));
        }
        let devices: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let mut wanted = Vec::new();
        if !self.cfg.tags.is_empty() {
            let url = self.api("tags/");
            let (status, body) = self
                .call_retrying(what, || self.http.get(&url).query(&[("limit", "1000")]))
                .await?;
            if status != 200 {
                return Err(self.needs_person(what, &format!("HTTP {status}: {}", clip(&body))));
            }
            let tags: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            for t in &self.cfg.tags {
                let id = tags["results"].as_array().and_then(|r| {
                    r.iter()
                        .find(|x| x["name"] == t.as_str())
                        .and_then(|x| x["id"].as_i64())
                });
                match id {
                    Some(id) => wanted.push(id),
                    None => return Ok(0),
                }
            }
        }
        Ok(devices["results"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter(|d| matches!(d["health"].as_str(), Some("Good" | "Unknown")))
                    .filter(|d| {
                        let has = d["tags"].as_array().cloned().unwrap_or_default();
                        wanted
                            .iter()
                            .all(|w| has.iter().any(|h| h.as_i64() == Some(*w)))
                    })
                    .count()
            })
            .unwrap_or(0))
    }

    /// Waits until this hunt has fewer jobs on the farm than the farm has devices to run
    /// them, then counts one more: boots go out as devices free, and none waits in LAVA's
    /// queue for a device another of ours holds.
    pub(super) async fn room(&self) -> Result<InFlight<'_>, HostError> {
        use std::sync::atomic::Ordering::SeqCst;
        let _gate = self.gate.lock().await;
        let mut warned: Option<Instant> = None;
        loop {
            let usable = self.usable_devices().await?;
            let running = self.in_flight.load(SeqCst);
            if running < usable {
                self.in_flight.fetch_add(1, SeqCst);
                return Ok(InFlight(&self.in_flight));
            }
            if usable == 0 && warned.is_none_or(|t| t.elapsed() > Duration::from_secs(600)) {
                tracing::warn!(
                    host = %self.name,
                    "no device of type {:?}{} can take a job on {} (all in Maintenance, Bad or \
                     Retired?): waiting for one",
                    self.cfg.device_type,
                    if self.cfg.tags.is_empty() { String::new() } else { format!(" with tags {:?}", self.cfg.tags) },
                    self.cfg.server
                );
                warned = Some(Instant::now());
            }
            crate::exec::kernel::status(&format!(
                "waiting for a free device: {running} jobs of ours on {usable} usable devices"
            ));
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends a cancel (GET, as LAVA 2023.01 wants it); its answer says nothing either way.
    pub(super) async fn cancel(&self, id: &str) {
        let url = self.api(&format!("jobs/{id}/cancel/"));
        let _ = self.call(self.http.get(&url)).await;
    }

    /// Log lines of job `id` from line `start` (0-based): how many were read, and those
    /// firstbad reads; none when there are no new ones.
    pub(super) async fn log_lines(
        &self,
        id: &str,
        start: usize,
    ) -> Result<(usize, Vec<LogLine>), HostError> {
        let url = self.api(&format!("jobs/{id}/logs/"));
        let (status, body) = self
            .call_retrying(&format!("reading LAVA job {id}'s log"), || {
                self.http.get(&url).query(&[("start", start.to_string())])
            })
            .await?;
        // 404: past the end (or no log yet).
        if status != 200 {
            return Ok((0, Vec::new()));
        }
        let read = body.lines().filter(|l| l.starts_with("- ")).count();
        Ok((read, parse_log(&body)))
    }
}
