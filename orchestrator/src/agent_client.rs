//! The orchestrator's side of the agent's HTTP API, with a timeout on every call.

use firstbad_wire::{
    ApiError, Identity, RunRequest, RunStarted, RunState, RunStatus, Workload, WorkloadResult,
};
use std::time::{Duration, Instant};

/// An agent call that did not give a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No answer (connection refused, reset, timed out).
    #[error("agent at {url}: {source}")]
    Transport {
        /// The URL called.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The agent answered with an error status.
    #[error("agent at {url}: HTTP {status}: {message}")]
    Status {
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The agent's reason.
        message: String,
    },
    /// The workload failed or was cancelled on the host.
    #[error("workload {state:?}: {message}")]
    Workload {
        /// Final state.
        state: RunState,
        /// The agent's reason.
        message: String,
    },
    /// The workload did not finish in time; it was cancelled.
    #[error("workload did not finish within {0} s (workload.timeout_s); cancelled")]
    Timeout(u64),
}

/// A client for one agent.
#[derive(Clone)]
pub struct AgentClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// Timeout of a single HTTP call; runs are polled, so no call waits on a workload.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl AgentClient {
    /// A client for the agent at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> AgentClient {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            // The agent closes a kept-alive connection idle for 10 s (issue 19): reuse one only
            // well inside that, never race its close.
            .pool_idle_timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .expect("a plain HTTP client builds");
        AgentClient {
            base: base.into(),
            token: token.into(),
            http,
        }
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<T, AgentError> {
        let transport = |source| AgentError::Transport {
            url: url.to_owned(),
            source,
        };
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let message = serde_json::from_str::<ApiError>(&body)
                .map(|e| e.error)
                .unwrap_or(body);
            return Err(AgentError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
                message,
            });
        }
        resp.json().await.map_err(transport)
    }

    /// `GET /v1/identity`.
    pub async fn identity(&self) -> Result<Identity, AgentError> {
        let url = format!("{}/v1/identity", self.base);
        self.send(self.http.get(&url), &url).await
    }

    /// Polls the identity until the agent answers or `deadline` passes.
    pub async fn wait_ready(&self, deadline: Instant) -> Result<Identity, AgentError> {
        loop {
            match self.identity().await {
                Ok(id) => return Ok(id),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Runs a workload to completion, polling once a second; cancels it past `timeout`.
    pub async fn run(
        &self,
        workload: &Workload,
        timeout: Duration,
    ) -> Result<WorkloadResult, AgentError> {
        let url = format!("{}/v1/runs", self.base);
        let started: RunStarted = self
            .send(
                self.http.post(&url).json(&RunRequest {
                    workload: workload.clone(),
                }),
                &url,
            )
            .await?;
        let deadline = Instant::now() + timeout;
        let status_url = format!("{}/v1/runs/{}", self.base, started.id);
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let st: RunStatus = self.send(self.http.get(&status_url), &status_url).await?;
            match st.state {
                RunState::Running if Instant::now() < deadline => continue,
                RunState::Running => {
                    let cancel = format!("{status_url}/cancel");
                    let _ = self
                        .send::<RunStatus>(self.http.post(&cancel), &cancel)
                        .await;
                    return Err(AgentError::Timeout(timeout.as_secs()));
                }
                RunState::Done => {
                    return st.result.ok_or_else(|| AgentError::Workload {
                        state: RunState::Done,
                        message: "done without a result".into(),
                    })
                }
                state => {
                    return Err(AgentError::Workload {
                        state,
                        message: st.error.unwrap_or_default(),
                    })
                }
            }
        }
    }
}
