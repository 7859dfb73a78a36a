//! The soak's receivers (`soak.rs`): one loopback server whose path's first
//! segment says how it behaves, recording every 2xx answer by path and
//! `webhook-id` (so a duplicate is seen as such):
//! - `/ok/…` answers 204;
//! - `/fail/…` answers 500 (its deliveries park after the ladder);
//! - `/hang/…` holds every third request for a minute (past the attempt
//!   timeout) and answers the rest 204;
//! - `/flap/…` answers 503 for the first ten seconds of every thirty, 204
//!   otherwise.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use crate::rig::Answered;

/// What the receivers have seen.
pub struct Seen {
    /// 2xx answers per path and `webhook-id`.
    pub delivered: Mutex<HashMap<String, HashMap<String, u32>>>,
    /// Requests to `/hang/` so far (every third is held).
    hang_count: AtomicU64,
    started: Instant,
}

impl Seen {
    /// How many `webhook-id`s `path` answered 2xx, and how many 2xx
    /// answers beyond the first one of each.
    pub fn delivered_to(&self, path: &str) -> (usize, u64) {
        let delivered = self.delivered.lock().map(|d| d.get(path).cloned());
        let ids = delivered.ok().flatten().unwrap_or_default();
        let twice = ids.values().map(|n| u64::from(n.saturating_sub(1))).sum();
        (ids.len(), twice)
    }

    /// Whether `path` answered 2xx to `id`.
    pub fn got(&self, path: &str, id: &str) -> bool {
        self.delivered
            .lock()
            .is_ok_and(|d| d.get(path).is_some_and(|ids| ids.contains_key(id)))
    }
}

/// Starts the receivers on a loopback port.
pub async fn start() -> anyhow::Result<(SocketAddr, Arc<Seen>)> {
    let seen = Arc::new(Seen {
        delivered: Mutex::default(),
        hang_count: AtomicU64::new(0),
        started: Instant::now(),
    });
    let addr = crate::rig::serve_loopback(seen.clone(), answer).await?;
    Ok((addr, seen))
}

fn count(map: &Mutex<HashMap<String, HashMap<String, u32>>>, path: &str, id: &str) {
    if let Ok(mut m) = map.lock() {
        *m.entry(path.to_owned())
            .or_default()
            .entry(id.to_owned())
            .or_default() += 1;
    }
}

async fn answer(seen: Arc<Seen>, req: Request<Incoming>) -> Answered {
    let path = req.uri().path().to_owned();
    let id = req
        .headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let kind = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let status = match kind {
        "fail" => StatusCode::INTERNAL_SERVER_ERROR,
        "hang"
            if seen
                .hang_count
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(3) =>
        {
            // Past the attempt timeout: the sender has given up on it, so
            // it is not a delivery.
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::GATEWAY_TIMEOUT
        }
        "flap" if seen.started.elapsed().as_secs() % 30 < 10 => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::NO_CONTENT,
    };
    if status.is_success() {
        count(&seen.delivered, &path, &id);
    }
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    Ok(resp)
}
