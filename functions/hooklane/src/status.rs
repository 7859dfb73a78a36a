//! `hooklane status`: what an operator asks first in an incident (how far
//! behind delivery is, for whom, since when), read from a running
//! hooklane's `GET /status` (`serve` on either backend, or the deployed
//! API) and printed as tables, or as the JSON itself with `--json`. The
//! numbers are those `GET /metrics` serves: both read one overview.

use serde_json::Value;

use crate::api_client::Api;

/// `hooklane status` arguments.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    api: Api,
    /// Print the status document as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

/// Fetches the status and prints it.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let status = args.api.call(http.get(args.api.at("/status"))).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

/// A duration in seconds, as an operator reads it: `42.0 s`, `7m 3s`,
/// `2h 5m`, `3d 4h`.
fn age(seconds: &Value) -> String {
    let Some(s) = seconds.as_f64() else {
        return "-".into();
    };
    let whole = s as u64;
    match whole {
        0..120 => format!("{s:.1} s"),
        120..7200 => format!("{}m {}s", whole / 60, whole % 60),
        7200..172_800 => format!("{}h {}m", whole / 3600, whole % 3600 / 60),
        _ => format!("{}d {}h", whole / 86_400, whole % 86_400 / 3600),
    }
}

pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Rows under a heading, in columns as wide as their widest cell.
pub(crate) fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    out.push_str(&line(head.iter().map(|h| h.to_string()).collect()));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
}

const UNKNOWN: &str = "  (this backend cannot tell; see the README)\n";

/// The backlog in all, then per tenant.
fn backlog(out: &mut String, backlog: &Value) {
    match backlog["pending"].as_u64() {
        Some(0) => out.push_str("Backlog: none pending\n"),
        Some(n) if backlog["oldest_age_seconds"].is_null() => out.push_str(&format!(
            "Backlog: {n} pending (the oldest's age: the queues' ApproximateAgeOfOldestMessage)\n"
        )),
        Some(n) => out.push_str(&format!(
            "Backlog: {n} pending, the oldest queued {} ago\n",
            age(&backlog["oldest_age_seconds"])
        )),
        None => out.push_str(&format!("Backlog:\n{UNKNOWN}")),
    }
    let tenants: Vec<Vec<String>> = backlog["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            vec![
                text(&t["tenant"]),
                text(&t["pending"]),
                age(&t["oldest_age_seconds"]),
            ]
        })
        .collect();
    if let Some(n) = backlog["slow_pool"].as_u64() {
        out.push_str(&format!("  of them on the slow pool's queue: {n}\n"));
    }
    if let Some(n) = backlog["slow_pool_lanes"].as_u64() {
        out.push_str(&format!("  lanes in the slow pool: {n}\n"));
    }
    if !tenants.is_empty() {
        table(out, &["TENANT", "PENDING", "OLDEST"], &tenants);
    }
}

/// A list of the status as a table of these fields, `empty` when it has
/// no rows, or [`UNKNOWN`] when the backend cannot tell.
fn listed(out: &mut String, list: &Value, fields: &[(&str, &str)], empty: &str) {
    match list.as_array() {
        Some(rows) if !rows.is_empty() => {
            let rows: Vec<Vec<String>> = rows
                .iter()
                .map(|x| fields.iter().map(|(k, _)| text(&x[*k])).collect())
                .collect();
            let head: Vec<&str> = fields.iter().map(|(_, h)| *h).collect();
            table(out, &head, &rows);
        }
        Some(_) => out.push_str(empty),
        None => out.push_str(UNKNOWN),
    }
}

/// The status as tables.
fn render(s: &Value) -> String {
    let mut out = format!("hooklane status at {}\n\n", text(&s["at"]));
    backlog(&mut out, &s["backlog"]);
    out.push_str(&format!(
        "\nSuspended subscriptions: {}\n",
        text(&s["suspended_total"])
    ));
    let suspended = [
        ("tenant", "TENANT"),
        ("subscription_id", "SUBSCRIPTION"),
        ("since", "SINCE"),
        ("reason", "WHY"),
        ("url", "URL"),
    ];
    listed(&mut out, &s["suspended"], &suspended, "");
    out.push_str("\nDead letters:\n");
    let parked = [("tenant", "TENANT"), ("parked", "PARKED")];
    listed(&mut out, &s["dead_letters"], &parked, "  none\n");
    out.push_str(&format!(
        "\nCircuit breakers open (in the answering process): {}\n",
        text(&s["open_breakers"])
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_an_operator_reads_them() {
        let a = |s: f64| age(&serde_json::json!(s));
        assert_eq!(a(3.04), "3.0 s");
        assert_eq!(a(423.0), "7m 3s");
        assert_eq!(a(7500.0), "2h 5m");
        assert_eq!(a(273_600.0), "3d 4h");
        assert_eq!(age(&Value::Null), "-");
    }

    #[test]
    fn an_empty_backlog_says_so() {
        let s = serde_json::json!({"backlog": {"pending": 0, "oldest_age_seconds": null, "tenants": []}});
        assert!(render(&s).contains("Backlog: none pending\n"));
    }

    #[test]
    fn the_tables_show_every_tenant_and_say_what_is_unknown() {
        let s = serde_json::json!({
            "at": "2026-12-05T07:46:46.064Z",
            "backlog": {"pending": 12, "oldest_age_seconds": 61.0, "tenants": [
                {"tenant": "acme", "pending": 10, "oldest_age_seconds": 61.0},
                {"tenant": "(others)", "pending": 2, "oldest_age_seconds": 5.0}]},
            "suspended_total": 1,
            "suspended": [{"tenant": "acme", "subscription_id": "sub_1", "url": "https://x.test/h",
                           "since": "2026-12-05T07:00:00.000Z", "reason": "dns: no such host"}],
            "dead_letters": null,
            "open_breakers": 2,
        });
        let out = render(&s);
        assert!(
            out.contains("Backlog: 12 pending, the oldest queued 61.0 s ago"),
            "{out}"
        );
        assert!(out.contains("  acme      10       61.0 s"), "{out}");
        assert!(out.contains("  (others)  2        5.0 s"), "{out}");
        assert!(out.contains("dns: no such host"), "{out}");
        assert!(
            out.contains("Dead letters:\n  (this backend cannot tell"),
            "{out}"
        );
        assert!(out.contains("open (in the answering process): 2"), "{out}");
    }
}
