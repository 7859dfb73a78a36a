//! The outbound HTTP client (the `Sender` port): egress-guarded resolution
//! (resolve once, check, connect to the checked address), no redirects, no
//! proxies, a per-attempt timeout, and a response excerpt capped at 1 KiB.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;

use crate::egress::{
    check_url, find_egress_error, Dns, EgressError, EgressPolicy, GuardedResolver,
};
use crate::policy::{parse_retry_after, AttemptResult};
use crate::ports::{Outbound, SendReport, Sender};

/// The most response body kept for the attempt log.
pub const EXCERPT_LIMIT: usize = 1024;

/// The `user-agent` every attempt carries.
pub const USER_AGENT: &str = concat!("hooklane/", env!("CARGO_PKG_VERSION"));

/// The production sender.
#[derive(Debug, Clone)]
pub struct HttpSender {
    client: reqwest::Client,
    egress: EgressPolicy,
    timeout: Duration,
}

impl HttpSender {
    /// A sender with the egress policy and attempt timeout of the config,
    /// resolving hosts through `dns`.
    pub fn new(
        egress: EgressPolicy,
        timeout: Duration,
        dns: Arc<dyn Dns>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(egress, dns)))
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(USER_AGENT)
            .build()?;
        Ok(Self {
            client,
            egress,
            timeout,
        })
    }

    async fn read_excerpt(resp: &mut reqwest::Response) -> Option<String> {
        let mut buf = Vec::new();
        while buf.len() < EXCERPT_LIMIT {
            match resp.chunk().await {
                Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                _ => break,
            }
        }
        if buf.is_empty() {
            return None;
        }
        buf.truncate(EXCERPT_LIMIT);
        let text = String::from_utf8_lossy(&buf);
        // Never cut inside a character: the lossy text may end in a
        // replacement character, which is fine for an excerpt.
        Some(text.into_owned())
    }
}

/// The most bytes of response headers an attempt keeps.
const HEADERS_LIMIT: usize = 2048;

/// A failed response's headers as a JSON object's text (what an operator
/// debugging it wants; a success keeps none, which keeps the log's writes
/// small), repeated names joined with `, `, cookies left out, and headers
/// that would take the text past [`HEADERS_LIMIT`] bytes left out.
fn headers_text(status: u16, headers: &reqwest::header::HeaderMap) -> Option<String> {
    if (200..300).contains(&status) {
        return None;
    }
    let mut kept = serde_json::Map::new();
    let mut size = 2;
    for name in headers.keys() {
        if name == reqwest::header::SET_COOKIE {
            continue;
        }
        let values: Vec<String> = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let value = values.join(", ");
        let adds = serde_json::to_string(name.as_str()).map_or(0, |n| n.len())
            + serde_json::to_string(&value).map_or(0, |v| v.len())
            + 2;
        if size + adds > HEADERS_LIMIT {
            continue;
        }
        size += adds;
        kept.insert(name.as_str().to_owned(), value.into());
    }
    (!kept.is_empty()).then(|| serde_json::Value::Object(kept).to_string())
}

/// Classifies a client error into an attempt result.
fn classify_error(err: &reqwest::Error) -> AttemptResult {
    let text = error_chain(err);
    if let Some(e) = find_egress_error(err) {
        return match e {
            EgressError::Unresolvable(_) => AttemptResult::Dns(e.to_string()),
            other => AttemptResult::Refused(other.to_string()),
        };
    }
    if err.is_timeout() {
        return AttemptResult::Timeout;
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        return AttemptResult::Tls(text);
    }
    AttemptResult::Connect(text)
}

/// The error and its causes on one line, for the attempt log.
fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut cur = err.source();
    while let Some(e) = cur {
        parts.push(e.to_string());
        cur = e.source();
    }
    parts.dedup();
    parts.join(": ")
}

#[async_trait]
impl Sender for HttpSender {
    async fn send(&self, request: Outbound) -> SendReport {
        let started = Instant::now();
        // IP-literal hosts bypass the resolver: check them here.
        if let Err(e) = check_url(request.url.as_str(), self.egress) {
            return SendReport {
                result: AttemptResult::Refused(e.to_string()),
                excerpt: None,
                headers: None,
                elapsed: started.elapsed(),
            };
        }
        let mut builder = self
            .client
            .post(request.url)
            .header("content-type", "application/json")
            .body(request.body);
        for (name, value) in request.headers {
            builder = builder.header(name.as_ref(), value);
        }
        let (result, excerpt, headers) = match builder.send().await {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let headers = headers_text(status, resp.headers());
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, SystemTime::now()));
                let remaining = self.timeout.saturating_sub(started.elapsed());
                let excerpt = tokio::time::timeout(remaining, Self::read_excerpt(&mut resp))
                    .await
                    .ok()
                    .flatten();
                (
                    AttemptResult::Response {
                        status,
                        retry_after,
                    },
                    excerpt,
                    headers,
                )
            }
            Err(e) => (classify_error(&e), None, None),
        };
        SendReport {
            result,
            excerpt,
            headers,
            elapsed: started.elapsed(),
        }
    }
}
