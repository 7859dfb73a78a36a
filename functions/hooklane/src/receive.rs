//! `hooklane receive`: a local webhook receiver for trying hooklane out. It
//! prints every request it gets (method, path, time, the webhook headers,
//! any other header the endpoint's options add, the body, and the status
//! it answered) and, given the subscription's secret, checks the Standard
//! Webhooks signature, saying why when it fails. With `--strict` a request
//! whose signature does not check answers 401, as a receiver should.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::Router;
use hooklane_core::signing::{sign, Secret};

/// How far a request's `webhook-timestamp` may be from now (the Standard
/// Webhooks tolerance, against replays).
const TOLERANCE_SECS: i64 = 300;

/// Headers every request carries that say nothing of the endpoint's options.
const ROUTINE: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "user-agent",
    "accept",
    "accept-encoding",
    "connection",
];

/// Options of `hooklane receive`.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The subscription's secret (`whsec_…`), to verify signatures.
    #[arg(long)]
    secret: Option<String>,
    /// Answer 401 to a request whose signature does not check (needs
    /// `--secret`); without it every request gets `--status`.
    #[arg(long, requires = "secret")]
    strict: bool,
    /// Status to answer with.
    #[arg(long, default_value_t = 204)]
    status: u16,
}

#[derive(Clone)]
struct Receiver {
    secret: Option<Secret>,
    strict: bool,
    status: StatusCode,
}

/// Runs the receiver until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let secret = args
        .secret
        .as_deref()
        .map(Secret::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--secret: {e}"))?;
    let status = StatusCode::from_u16(args.status)?;
    let app = router(Receiver {
        secret,
        strict: args.strict,
        status,
    });
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("receiving webhooks on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

fn router(r: Receiver) -> Router {
    Router::new().fallback(handle).with_state(r)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether the request's signature checks, and if not, why.
fn verify(secret: &Secret, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), String> {
    let id = header(headers, "webhook-id");
    let sigs = header(headers, "webhook-signature");
    if id.is_empty() || sigs.is_empty() {
        return Err("no webhook-id or webhook-signature header (not sent by hooklane?)".into());
    }
    let ts = header(headers, "webhook-timestamp");
    let ts: i64 = ts
        .parse()
        .map_err(|_| format!("webhook-timestamp is not unix seconds: {ts:?}"))?;
    if (now - ts).abs() > TOLERANCE_SECS {
        return Err(format!(
            "webhook-timestamp is {} s from this machine's clock (at most {TOLERANCE_SECS})",
            now - ts
        ));
    }
    let expected = sign(secret, id, ts, body);
    if sigs.split(' ').any(|s| s == expected) {
        Ok(())
    } else {
        Err("no v1 signature matches: another secret, or the body was changed".into())
    }
}

async fn handle(
    State(r): State<Receiver>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let checked = r.secret.as_ref().map(|s| verify(s, &headers, &body, secs));
    let (verdict, answer) = match &checked {
        None => ("not checked (no --secret)".to_owned(), r.status),
        Some(Ok(())) => ("valid".to_owned(), r.status),
        Some(Err(why)) if r.strict => (format!("INVALID: {why}"), StatusCode::UNAUTHORIZED),
        Some(Err(why)) => (format!("INVALID: {why}"), r.status),
    };
    let mut out = format!(
        "{method} {uri}  {}  answered {}\n",
        humantime::format_rfc3339_seconds(now),
        answer.as_u16()
    );
    for (name, value) in &headers {
        if ROUTINE.contains(&name.as_str()) {
            continue;
        }
        let value = match name.as_str() {
            // The scheme only: the credential stays off the screen.
            "authorization" => {
                let v = value.to_str().unwrap_or("");
                format!("{} …", v.split(' ').next().unwrap_or(""))
            }
            _ => String::from_utf8_lossy(value.as_bytes()).into_owned(),
        };
        out.push_str(&format!("{name}: {value}\n"));
    }
    println!(
        "{out}signature: {verdict}\n{}\n",
        String::from_utf8_lossy(&body)
    );
    answer
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use hooklane_core::signing::webhook_headers;
    use tower::ServiceExt as _;

    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    async fn answer(strict: bool, sign_with: Option<&str>) -> u16 {
        let body = br#"{"type":"a.b","data":{}}"#;
        let mut req = Request::post("/hooks");
        if let Some(key) = sign_with {
            let secret = Secret::parse(key).unwrap();
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            for (k, v) in webhook_headers(&[&secret], "evt_1", now.as_secs() as i64, 1, body) {
                req = req.header(k, v);
            }
        }
        let app = router(Receiver {
            secret: Some(Secret::parse(SECRET).unwrap()),
            strict,
            status: StatusCode::NO_CONTENT,
        });
        let res = app.oneshot(req.body(Body::from(&body[..])).unwrap()).await;
        res.unwrap().status().as_u16()
    }

    #[tokio::test]
    async fn strict_answers_401_to_a_bad_or_missing_signature_and_204_to_a_good_one() {
        let other = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        assert_eq!(answer(true, Some(SECRET)).await, 204);
        assert_eq!(answer(true, Some(other)).await, 401);
        assert_eq!(answer(true, None).await, 401);
        assert_eq!(answer(false, Some(other)).await, 204, "not strict");
    }

    #[test]
    fn a_failed_check_says_why() {
        let secret = Secret::parse(SECRET).unwrap();
        let mut h = HeaderMap::new();
        assert!(verify(&secret, &h, b"{}", 1000)
            .unwrap_err()
            .contains("no webhook-id"));
        h.insert("webhook-id", "evt_1".parse().unwrap());
        h.insert("webhook-signature", "v1,xyz".parse().unwrap());
        h.insert("webhook-timestamp", "100".parse().unwrap());
        assert!(verify(&secret, &h, b"{}", 1000)
            .unwrap_err()
            .contains("900 s from"));
        h.insert("webhook-timestamp", "1000".parse().unwrap());
        assert!(verify(&secret, &h, b"{}", 1000)
            .unwrap_err()
            .contains("another secret"));
    }
}
