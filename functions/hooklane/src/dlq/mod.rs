//! `hooklane dlq`: the operator's view of the AWS backend's dead-letter queue.
//!
//! On AWS the delivery handler parks a delivery that ran out of attempts by
//! sending it to the SQS FIFO dead-letter queue, with attributes that say
//! why (attempts, last status, reason, times). Through `hooklane_aws`:
//! `list` and `show` peek without consuming, `replay` re-sends selected
//! deliveries with a fresh retry ladder, `redrive` moves everything back
//! with `StartMessageMoveTask`, and `purge` deletes after confirmation.
//! Environment as for `hooklane serve --backend aws`: the `HOOKLANE_TABLE`
//! and `HOOKLANE_*_QUEUE_URL`/`HOOKLANE_DLQ_URL` names, plus the AWS SDK's.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};

use anyhow::{bail, Context as _};
use hooklane_aws::dlq::{Filter, ParkedMessage};
use hooklane_aws::AwsStore;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How many characters of the reason the `list` table shows.
const REASON_WIDTH: usize = 60;
/// How many matches `show` reads at most (one per subscription).
const SHOW_MAX: usize = 1000;
/// The `list` table's column titles.
const HEADER: &str = "SUBSCRIPTION|EVENT|TYPE|ATTEMPTS|LAST STATUS|REASON|LAST ATTEMPT";
/// The word that confirms a purge.
const PURGE_WORD: &str = "purge";

/// Options of `hooklane dlq`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(clap::Subcommand)]
enum DlqCommand {
    /// List parked deliveries without consuming them.
    List {
        #[command(flatten)]
        select: Select,
        /// Read at most this many matches.
        #[arg(long, default_value_t = 100)]
        max: usize,
        /// Print one JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print every attribute of an event's parked deliveries.
    Show {
        /// The event id.
        event_id: String,
        /// Only this subscription's delivery (repeatable).
        #[arg(long = "subscription", value_name = "ID")]
        subscriptions: Vec<String>,
        /// Print one JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Re-send selected parked deliveries with a fresh retry ladder.
    Replay {
        #[command(flatten)]
        select: Select,
        /// Replay at most this many.
        #[arg(long, default_value_t = 10_000)]
        max: usize,
        /// Replay every parked delivery (required when no filter is given).
        #[arg(long, conflicts_with_all = ["tenant", "subscriptions", "events"])]
        all: bool,
    },
    /// Move every parked delivery back with StartMessageMoveTask.
    Redrive,
    /// Delete selected parked deliveries for good (asks first).
    Purge {
        #[command(flatten)]
        select: Select,
        /// Delete at most this many.
        #[arg(long, default_value_t = 10_000)]
        max: usize,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

/// Which parked deliveries a subcommand takes.
#[derive(clap::Args, Debug, Default)]
struct Select {
    /// Only this tenant's.
    #[arg(long, value_name = "ID")]
    tenant: Option<String>,
    /// Only this subscription's (repeatable).
    #[arg(long = "subscription", value_name = "ID")]
    subscriptions: Vec<String>,
    /// Only this event's (repeatable).
    #[arg(long = "event", value_name = "ID")]
    events: Vec<String>,
}

impl Select {
    /// The library's filter; an empty list means "any".
    fn filter(&self) -> Filter {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        Filter {
            tenant: self.tenant.clone(),
            subscriptions: list(&self.subscriptions),
            events: list(&self.events),
        }
    }

    fn is_empty(&self) -> bool {
        self.tenant.is_none() && self.subscriptions.is_empty() && self.events.is_empty()
    }
}

/// Runs `hooklane dlq`.
pub async fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        DlqCommand::List { select, max, json } => list(&select.filter(), max, json).await,
        DlqCommand::Show {
            event_id,
            subscriptions,
            json,
        } => show(event_id, subscriptions, json).await,
        DlqCommand::Replay { select, max, all } => {
            replay_filter(&select, all)?;
            replay(&select.filter(), max).await
        }
        DlqCommand::Redrive => redrive().await,
        DlqCommand::Purge { select, max, yes } => {
            must_ask(yes, std::io::stdin().is_terminal())?;
            purge(&select.filter(), max, yes).await
        }
    }
}

/// Connects to the AWS backend named by the environment.
async fn store() -> anyhow::Result<AwsStore> {
    let settings = hooklane_aws::AwsEnv::from_env()
        .and_then(|env| env.settings())
        .context("AWS backend settings")?;
    let sdk = hooklane_aws::sdk_config().await;
    Ok(AwsStore::new(&sdk, settings))
}

async fn list(filter: &Filter, max: usize, json: bool) -> anyhow::Result<()> {
    let parked = store().await?.dlq_peek(filter, max).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&parked)?);
    } else if parked.is_empty() {
        println!("no parked deliveries");
    } else {
        let rows: Vec<[String; 7]> = parked.iter().map(row).collect();
        print!("{}", table(&rows));
        if parked.len() >= max {
            eprintln!("(stopped at --max {max})");
        }
    }
    Ok(())
}

async fn show(event_id: String, subscriptions: Vec<String>, json: bool) -> anyhow::Result<()> {
    let to = (!subscriptions.is_empty()).then(|| format!(" to {}", subscriptions.join(", ")));
    let events = vec![event_id.clone()];
    let filter = Select {
        tenant: None,
        subscriptions,
        events,
    }
    .filter();
    let parked = store().await?.dlq_peek(&filter, SHOW_MAX).await?;
    if parked.is_empty() {
        let to = to.unwrap_or_default();
        bail!("no parked delivery of event {event_id}{to} in the dead-letter queue");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&parked)?);
        return Ok(());
    }
    for (i, p) in parked.iter().enumerate() {
        if i > 0 {
            println!();
        }
        for (k, v) in details(&base(p), &p.attributes) {
            println!("{k}: {v}");
        }
    }
    Ok(())
}

/// Refuses a replay of everything unless `--all` says so.
fn replay_filter(select: &Select, all: bool) -> anyhow::Result<()> {
    if select.is_empty() && !all {
        bail!("refusing to replay every parked delivery: give --tenant, --subscription or --event, or --all");
    }
    Ok(())
}

async fn replay(filter: &Filter, max: usize) -> anyhow::Result<()> {
    let store = store().await?;
    let bar = progress(None, "replaying");
    let n = store
        .dlq_replay(filter, max, &|n| bar.set_position(n as u64))
        .await;
    bar.finish_and_clear();
    println!("replayed {} deliveries", n?);
    Ok(())
}

async fn redrive() -> anyhow::Result<()> {
    let handle = store().await?.dlq_redrive_all().await.map_err(|e| {
        anyhow::anyhow!(
            "starting the redrive failed: {}\n\
             Some AWS-compatible servers do not implement StartMessageMoveTask; \
             `hooklane dlq replay --all` replays message by message instead.",
            hooklane_core::telemetry::Chain(&e)
        )
    })?;
    println!("redrive started; task handle: {handle}");
    Ok(())
}

async fn purge(filter: &Filter, max: usize, yes: bool) -> anyhow::Result<()> {
    let store = store().await?;
    let count = store.dlq_peek(filter, max).await?.len();
    if count == 0 {
        println!("no parked deliveries");
        return Ok(());
    }
    if !yes && !ask(count, &mut std::io::stdin().lock(), &mut std::io::stderr())? {
        bail!("purge not confirmed; nothing deleted");
    }
    let bar = progress(Some(count), "purging");
    // Never delete more than the operator confirmed.
    let n = store
        .dlq_purge(filter, count, &|n| bar.set_position(n as u64))
        .await;
    bar.finish_and_clear();
    println!("purged {}", n?);
    Ok(())
}

/// Whether a purge may go on: `--yes`, or a terminal to ask on.
fn must_ask(yes: bool, interactive: bool) -> anyhow::Result<()> {
    if !yes && !interactive {
        bail!("stdin is not a terminal, so purge cannot ask for confirmation: pass --yes");
    }
    Ok(())
}

/// Asks the operator to type the confirmation word.
fn ask(count: usize, input: &mut dyn BufRead, out: &mut dyn Write) -> anyhow::Result<bool> {
    write!(
        out,
        "Delete {count} parked deliveries? This cannot be undone. Type '{PURGE_WORD}' to confirm: "
    )?;
    out.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    Ok(line.trim() == PURGE_WORD)
}

/// A progress bar on stderr, hidden when stderr is not a terminal; a
/// spinner with a count when the total is unknown.
fn progress(len: Option<usize>, msg: &'static str) -> ProgressBar {
    let bar = ProgressBar::no_length().with_message(msg);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let template = if let Some(n) = len {
        bar.set_length(n as u64);
        "{msg} [{bar:40}] {pos}/{len} {elapsed}"
    } else {
        "{spinner} {msg}: {pos} {elapsed}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// The message id and the delivery's fields, from the message body.
fn base(p: &ParkedMessage) -> [(&'static str, String); 5] {
    let d = &p.delivery;
    [
        ("message_id", p.message_id.clone()),
        ("tenant", d.tenant.clone()),
        ("subscription_id", d.subscription_id.clone()),
        ("event_id", d.event_id.clone()),
        ("event_type", d.event_type.clone()),
    ]
}

/// Every field of a parked message: the body's, then the other
/// attributes sorted by name.
fn details(base: &[(&str, String)], attrs: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut rest: Vec<(String, String)> = attrs
        .iter()
        .filter(|(k, _)| !base.iter().any(|(b, _)| b == k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    rest.sort();
    let base = base.iter().map(|(k, v)| ((*k).to_owned(), v.clone()));
    base.chain(rest).collect()
}

/// One `list` row: subscription, event, type, attempts, last status,
/// reason (shortened), last attempt.
fn row(p: &ParkedMessage) -> [String; 7] {
    let d = &p.delivery;
    let attr = |k: &str| p.attributes.get(k).map_or("-", String::as_str).to_owned();
    [
        d.subscription_id.clone(),
        d.event_id.clone(),
        d.event_type.clone(),
        attr("attempts"),
        attr("last_status"),
        shorten(&attr("reason"), REASON_WIDTH),
        attr("last_attempt_at"),
    ]
}

/// One line of at most `max` characters (control characters become
/// spaces; an ellipsis marks a cut).
fn shorten(text: &str, max: usize) -> String {
    let flat = text.replace(char::is_control, " ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The `list` table: a header, then left-aligned columns two spaces apart.
fn table(rows: &[[String; 7]]) -> String {
    let header: Vec<String> = HEADER.split('|').map(str::to_owned).collect();
    let lines: Vec<&[String]> = std::iter::once(&header[..])
        .chain(rows.iter().map(|r| &r[..]))
        .collect();
    let width = |i: usize| lines.iter().map(|l| l[i].chars().count()).max();
    let widths: Vec<usize> = (0..7).map(|i| width(i).unwrap_or(0)).collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
