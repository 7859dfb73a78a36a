//! `hooklane receive`: a local webhook receiver for trying hooklane out. It
//! prints every request it gets and, given the subscription's secret,
//! checks the Standard Webhooks signature.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use hooklane_core::signing::{sign, Secret};

/// Options of `hooklane receive`.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The subscription's secret (`whsec_…`), to verify signatures.
    #[arg(long)]
    secret: Option<String>,
    /// Status to answer with.
    #[arg(long, default_value_t = 204)]
    status: u16,
}

#[derive(Clone)]
struct Receiver {
    secret: Option<Secret>,
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
    let app = Router::new()
        .fallback(post(handle))
        .with_state(Receiver { secret, status });
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("receiving webhooks on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn handle(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let id = header(&headers, "webhook-id");
    let ts = header(&headers, "webhook-timestamp");
    let sigs = header(&headers, "webhook-signature");
    let verdict = match (&r.secret, ts.parse::<i64>()) {
        (None, _) => "not checked (no --secret)".to_owned(),
        (Some(_), Err(_)) => "INVALID: no webhook-timestamp".to_owned(),
        (Some(secret), Ok(ts)) => {
            let expected = sign(secret, id, ts, &body);
            if sigs.split(' ').any(|s| s == expected) {
                "valid".to_owned()
            } else {
                "INVALID".to_owned()
            }
        }
    };
    println!(
        "webhook-id: {id}\nwebhook-attempt: {}\nwebhook-timestamp: {ts}\nsignature: {verdict}\n{}\n",
        header(&headers, "webhook-attempt"),
        String::from_utf8_lossy(&body)
    );
    r.status
}
