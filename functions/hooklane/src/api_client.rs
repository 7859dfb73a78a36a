//! What the command's tools that talk to a running hooklane share (`status`,
//! `dead-letters`): where it is and the operator token (`--url`,
//! `--token`), and one call that sends the token and answers the JSON, or
//! the status and body of a refusal.

use anyhow::Context;
use serde_json::Value;

/// A running hooklane's API.
#[derive(clap::Args)]
pub struct Api {
    /// The hooklane API's base URL.
    #[arg(long, env = "HOOKLANE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The operator token (`HOOKLANE_API_TOKEN` of the server).
    #[arg(long, env = "HOOKLANE_API_TOKEN", hide_env_values = true)]
    token: String,
}

impl Api {
    /// The address of `path` (which starts with `/`).
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches('/'))
    }

    /// Sends `req` (made for [`Api::at`]) with the token; its JSON answer.
    pub async fn call(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let req = req.bearer_auth(&self.token).build()?;
        let url = req.url().to_string();
        let response = reqwest::Client::new()
            .execute(req)
            .await
            .with_context(|| format!("asking {url}"))?;
        let code = response.status();
        let body = response.text().await.context("reading the answer")?;
        if !code.is_success() {
            anyhow::bail!("{url} answered {code}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("{url} did not answer JSON"))
    }
}
