//! `hooklane dead-letters`: a tenant's parked deliveries, listed and
//! replayed through a running hooklane's API (`GET` and `POST
//! /v1/tenants/{tenant}/dead-letters…`), so it works the same on the
//! embedded backend and on AWS. (`hooklane dlq`, with the `aws` feature,
//! is the other tool: it reads the SQS dead-letter queue of messages the
//! delivery function could not handle at all.)

use anyhow::Context;
use serde_json::{json, Value};

use crate::api_client::Api;
use crate::status::{table, text};

/// `hooklane dead-letters` arguments.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    api: Api,
    /// The tenant whose dead letters these are.
    #[arg(long)]
    tenant: String,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// List parked deliveries, in the order they were accepted, with why
    /// each was parked.
    List {
        /// Only this subscription's.
        #[arg(long)]
        subscription: Option<String>,
        /// At most this many (the API's pages are followed).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print the items as JSON lines, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Put parked deliveries back on their lanes with a fresh ladder: the
    /// events named, or else every one (of `--subscription` when given).
    Replay {
        /// Only this subscription's.
        #[arg(long)]
        subscription: Option<String>,
        /// The events to replay (all parked ones when none is named).
        event_ids: Vec<String>,
    },
}

/// Runs the action against the API and prints what it answered.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let base = args
        .api
        .at(&format!("/v1/tenants/{}/dead-letters", args.tenant));
    let http = reqwest::Client::new();
    let call = |req| args.api.call(req);
    match args.action {
        Action::List {
            subscription,
            limit,
            json,
        } => {
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            while items.len() < limit {
                let mut query = vec![("limit", (limit - items.len()).min(100).to_string())];
                query.extend(subscription.clone().map(|s| ("subscription_id", s)));
                query.extend(cursor.take().map(|c| ("cursor", c)));
                let page = call(http.get(&base).query(&query))
                    .await
                    .with_context(|| format!("listing {base}"))?;
                items.extend(page["items"].as_array().into_iter().flatten().cloned());
                match page["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
            print!("{}", render(&items, json));
        }
        Action::Replay {
            subscription,
            event_ids,
        } => {
            let mut body = json!({});
            if let Some(s) = subscription {
                body["subscription_id"] = s.into();
            }
            if !event_ids.is_empty() {
                body["event_ids"] = event_ids.into();
            }
            let answer = call(http.post(format!("{base}/replay")).json(&body))
                .await
                .with_context(|| format!("replaying at {base}/replay"))?;
            println!("replayed {}", text(&answer["replayed"]));
        }
    }
    Ok(())
}

/// The items as a table (or JSON lines).
fn render(items: &[Value], json: bool) -> String {
    if json {
        return items.iter().map(|i| format!("{i}\n")).collect();
    }
    if items.is_empty() {
        return "no dead letters\n".into();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            [
                "parked_at",
                "event_id",
                "event_type",
                "subscription_id",
                "attempts",
                "last_status_code",
                "reason",
            ]
            .iter()
            .map(|k| text(&d[*k]))
            .collect()
        })
        .collect();
    let mut out = format!("{} dead letters\n", items.len());
    table(
        &mut out,
        &[
            "PARKED", "EVENT", "TYPE", "ENDPOINT", "ATTEMPTS", "LAST", "REASON",
        ],
        &rows,
    );
    out
}
