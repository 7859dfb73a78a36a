//! `hooklane-bench report`: every figure of BENCHMARKS.md that needs no
//! AWS account (1, 2, 3, 3b, 4, 7, 8, 10, 10b, 11, and 5 on the local
//! AWS-compatible server), run in one go on this machine, written as the
//! results table: each figure's median and range over its runs, its
//! target and whether the median meets it, headed by the date, the
//! commit, the CPU model, the cores and the build profile. With
//! `--baseline BIN`, each figure runs for that binary too, in turn with
//! this one (run 1 of both, then run 2 of both, ...), and the table shows
//! both and their ratio. The two go first in alternate runs, and a
//! baseline raises the default from three to four runs, so that each
//! build has as many runs in each place (figure 7 runs once, this build
//! first): figure 3's p99 moved with the order in some reports, with no
//! consistent direction (BENCHMARKS.md). Each run's values go to standard
//! error as the run ends. `--quick` runs every figure on a small workload
//! (a smoke check, not a figure to record).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::rig::{median_range, quantile, spread};
use crate::{aws_cost, figures, lanes, publish};

/// The report's options.
#[derive(clap::Args)]
pub struct Args {
    /// A small workload for each figure (a minute or two in all).
    #[arg(long)]
    quick: bool,
    /// Another `hooklane` binary to run every figure against, in turn.
    #[arg(long)]
    baseline: Option<String>,
    /// Runs of each figure (default: 3, 4 with `--baseline`, 1 with
    /// `--quick` even with `--baseline`).
    #[arg(long)]
    runs: Option<usize>,
    /// Also write the table to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these figures (comma-separated, e.g. `1,2,10,5`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// How much work each figure does.
struct Sizes {
    hung: usize,
    samples: usize,
    secs: u64,
    backlog: u64,
    fan_out: usize,
    aws_events: u64,
    memory: u64,
    publishes: usize,
    many_subs: usize,
    many_events: u64,
}

const FULL: Sizes = Sizes {
    hung: 1000,
    samples: 30,
    secs: 30,
    backlog: 10_000,
    fan_out: 10_000,
    aws_events: 500,
    memory: 1_000_000,
    publishes: 5000,
    many_subs: 1000,
    many_events: 40_000,
};

const QUICK: Sizes = Sizes {
    hung: 20,
    samples: 5,
    secs: 2,
    backlog: 500,
    fan_out: 200,
    aws_events: 20,
    memory: 2000,
    publishes: 300,
    many_subs: 20,
    many_events: 400,
};

/// One row of the table: what it measures and what it must meet.
struct Row {
    figure: &'static str,
    what: String,
    target: &'static str,
    unit: &'static str,
    digits: usize,
    meets: Option<fn(f64) -> bool>,
}

/// The rows, in the table's order.
fn rows(s: &Sizes) -> Vec<Row> {
    let row = |figure, what: String, target, unit, digits, meets| Row {
        figure,
        what,
        target,
        unit,
        digits,
        meets,
    };
    vec![
        row(
            "1",
            format!(
                "Healthy p50 latency while {} receivers hang, as a multiple of none",
                s.hung
            ),
            "≤ 1.5×",
            "×",
            2,
            Some(|v| v <= 1.5),
        ),
        row(
            "2",
            format!(
                "Throughput, 100 subscriptions, publish API included, {} s",
                s.secs
            ),
            "≥ 5,000/s",
            "/s",
            0,
            Some(|v| v >= 5000.0),
        ),
        row(
            "2",
            "CPU per delivery (server), 100 subscriptions".into(),
            "≤ 0.2 ms",
            "ms",
            3,
            Some(|v| v <= 0.2),
        ),
        row(
            "3",
            "p99 publish-to-arrival at half the throughput above".into(),
            "< 50 ms",
            "ms",
            2,
            Some(|v| v < 50.0),
        ),
        row(
            "3b",
            format!(
                "Drain of a {}-delivery backlog, first to last arrival",
                s.backlog
            ),
            "≥ 9,000/s",
            "/s",
            0,
            Some(|v| v >= 9000.0),
        ),
        row(
            "4",
            format!(
                "Fan-out of one event to {} subscriptions, enqueued",
                s.fan_out
            ),
            "< 1 s",
            "s",
            3,
            Some(|v| v < 1.0),
        ),
        row(
            "5",
            format!(
                "AWS cost per million 1 KiB deliveries at load, {} on the local server",
                s.aws_events
            ),
            "≤ $2.00",
            "$",
            2,
            Some(|v| v <= 2.0),
        ),
        row(
            "7",
            format!("Peak RSS after {} deliveries", s.memory),
            "≤ 64 MB",
            "MB",
            1,
            Some(|v| v <= 64.0),
        ),
        row(
            "8",
            "Server CPU per publish, 1 KiB, no subscriptions".into(),
            "none (measured)",
            "ms",
            4,
            None,
        ),
        row(
            "10",
            "One subscription, 64 lanes, receiver 100 ms, first 90 %".into(),
            "≥ 500/s",
            "/s",
            0,
            Some(|v| v >= 500.0),
        ),
        row(
            "10b",
            format!("{} subscriptions × 4 lanes, receiver 50 ms", s.many_subs),
            "none (measured)",
            "/s",
            0,
            None,
        ),
        row(
            "11",
            "Rate limit 100/s on 64 lanes, measured".into(),
            "90–110/s",
            "/s",
            1,
            Some(|v| (90.0..=110.0).contains(&v)),
        ),
    ]
}

/// Which figures a run measures: those `--only` names (all when empty);
/// figure 7 in the first run only (its million deliveries are a flat
/// check, not a sample).
struct Wanted<'a> {
    only: &'a [String],
    first_run: bool,
}

impl Wanted<'_> {
    fn has(&self, figure: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|f| f == figure))
            && (figure != "7" || self.first_run)
    }
}

/// One run of the wanted figures for `bin`, each value pushed to its
/// row's runs (`Err` for a figure that failed, with why).
async fn run_once(bin: &str, s: &Sizes, want: &Wanted<'_>, out: &mut [Vec<Result<f64, String>>]) {
    let err = |e: anyhow::Error| format!("{e:#}");
    let median = |mut v: Vec<f64>| spread(&mut v).0;
    if want.has("1") {
        // The healthy subscription's median with and without hung ones.
        let iso = async {
            let none = median(figures::isolation(bin, 0, s.samples).await?);
            let hung = median(figures::isolation(bin, s.hung, s.samples).await?);
            anyhow::Ok(hung / none)
        };
        out[0].push(iso.await.map_err(err));
    }
    if want.has("2") || want.has("3") {
        // 3 runs at half of what 2 measured.
        let tp = figures::throughput(bin, 100, s.secs, 32, u64::MAX).await;
        let rate = tp.as_ref().map(|t| t.per_sec / 2.0).ok();
        if want.has("2") {
            let (per_sec, cpu) = match tp {
                Ok(t) => (Ok(t.per_sec), Ok(t.cpu_ms)),
                Err(e) => (Err(err(e)), Err("see the row above".into())),
            };
            out[1].push(per_sec);
            out[2].push(cpu);
        }
        if want.has("3") {
            let p99 = async {
                let rate = rate.ok_or_else(|| anyhow::anyhow!("no throughput to take half of"))?;
                let mut lat = figures::latency(bin, rate, s.secs.min(20)).await?;
                anyhow::ensure!(!lat.is_empty(), "nothing arrived");
                lat.sort_by(f64::total_cmp);
                anyhow::Ok(quantile(&lat, 0.99))
            };
            out[3].push(p99.await.map_err(err));
        }
    }
    if want.has("3b") {
        out[4].push(
            figures::drain(bin, s.backlog)
                .await
                .map(|d| d.steady)
                .map_err(err),
        );
    }
    if want.has("4") {
        out[5].push(
            figures::fan_out(bin, s.fan_out, false)
                .await
                .map(|f| f.enqueued)
                .map_err(err),
        );
    }
    if want.has("5") {
        let shape = aws_cost::Shape {
            events: s.aws_events,
            publishers: 1,
            per_event: 1,
            at_load: true,
            batch: 1,
            others: 0,
        };
        out[6].push(aws_cost::run(bin, shape).await.map_err(err));
    }
    if want.has("7") {
        let marks = figures::memory(bin, s.memory).await.map_err(err);
        let last = marks.and_then(|m| {
            m.last()
                .map(|(_, rss)| *rss)
                .ok_or_else(|| "no mark".into())
        });
        out[7].push(last);
    }
    if want.has("8") {
        let shape = publish::Shape::KibText;
        out[8].push(
            publish::run(bin, shape, s.publishes, 16)
                .await
                .map(|r| r.cpu_ms)
                .map_err(err),
        );
    }
    if want.has("10") {
        let events = (640 * s.secs.min(10)).max(50);
        let lanes64 = lanes::run(bin, serde_json::json!({"lanes": 64}), 100, events, true).await;
        out[9].push(lanes64.map(|r| r.steady_per_sec).map_err(err));
    }
    if want.has("10b") {
        let many = lanes::many(bin, s.many_subs, 4, 50, s.many_events, 0.5, s.secs.min(20)).await;
        out[10].push(many.map(|(per_sec, _)| per_sec).map_err(err));
    }
    if want.has("11") {
        let rated = serde_json::json!({"lanes": 64, "rate_limit": 100});
        let rate_run = lanes::run(bin, rated, 0, (100 * s.secs.min(10)).max(50), false).await;
        out[11].push(rate_run.map(|r| r.per_sec).map_err(err));
    }
}

/// Runs every figure (`runs` times, for each binary in turn, alternating
/// which goes first) and prints the table; fails when a figure of this
/// build failed.
pub async fn run(bin: &str, args: Args) -> anyhow::Result<()> {
    let sizes = if args.quick { &QUICK } else { &FULL };
    let runs = args
        .runs
        .unwrap_or(match (args.quick, &args.baseline) {
            (true, _) => 1,
            (false, Some(_)) => 4,
            (false, None) => 3,
        })
        .max(1);
    let bins: Vec<&str> = [bin].into_iter().chain(args.baseline.as_deref()).collect();
    let rows = rows(sizes);
    if let Some(unknown) = args
        .only
        .iter()
        .find(|f| !rows.iter().any(|r| r.figure == f.trim()))
    {
        anyhow::bail!(
            "--only: no figure {unknown:?} (the figures: 1, 2, 3, 3b, 4, 5, 7, 8, 10, 10b, 11)"
        );
    }
    let only: Vec<String> = args.only.iter().map(|f| f.trim().to_owned()).collect();
    // values[bin][row] = one result per run.
    let mut values: Vec<Vec<Vec<Result<f64, String>>>> =
        vec![vec![Vec::new(); rows.len()]; bins.len()];
    for r in 0..runs {
        let want = Wanted {
            only: &only,
            first_run: r == 0,
        };
        // Alternate runs start with the other build.
        let mut order: Vec<usize> = (0..bins.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for b in order {
            let name = bins[b];
            eprintln!("report: run {} of {runs}, {name}", r + 1);
            let before: Vec<usize> = values[b].iter().map(Vec::len).collect();
            run_once(name, sizes, &want, &mut values[b]).await;
            // This run's values, so that a figure can be read by which
            // build went first.
            let this: Vec<String> = rows
                .iter()
                .zip(&values[b])
                .zip(before)
                .filter(|((_, v), n)| v.len() > *n)
                .map(|((row, v), _)| match v.last() {
                    Some(Ok(x)) => format!("{} {}", row.figure, with_unit(row, *x)),
                    _ => format!("{} failed", row.figure),
                })
                .collect();
            eprintln!(
                "report: run {} of {runs}, {name}: {}",
                r + 1,
                this.join(", ")
            );
        }
    }
    let table = render(&bins, &rows, &values, args.quick);
    print!("{table}");
    if let Some(path) = &args.out {
        std::fs::write(path, &table)?;
    }
    // A baseline may predate a figure (its cell says why); this build may
    // not.
    let failed = values[0].iter().flatten().filter(|v| v.is_err()).count();
    anyhow::ensure!(failed == 0, "{failed} figure run(s) failed (see the table)");
    Ok(())
}

/// One value of `row`, in its unit.
fn with_unit(row: &Row, x: f64) -> String {
    let d = row.digits;
    match row.unit {
        "$" => format!("${x:.d$}"),
        "×" | "/s" => format!("{x:.d$}{}", row.unit),
        unit => format!("{x:.d$} {unit}"),
    }
}

/// "median (min–max)" of a row's runs, or why a run failed.
fn cell(runs: &[Result<f64, String>], row: &Row) -> (String, Option<f64>) {
    if let Some(Err(why)) = runs.iter().find(|v| v.is_err()) {
        return (
            format!("failed: {}", why.replace('|', "/").replace('\n', " ")),
            None,
        );
    }
    let mut v: Vec<f64> = runs
        .iter()
        .filter_map(|v| v.as_ref().ok().copied())
        .collect();
    let (m, lo, hi) = median_range(&mut v);
    let with_unit = |x: f64| with_unit(row, x);
    let text = if v.len() > 1 {
        format!("{} ({}–{})", with_unit(m), with_unit(lo), with_unit(hi))
    } else {
        with_unit(m)
    };
    (text, Some(m))
}

/// The table, headed by where and what it measured.
fn render(
    bins: &[&str],
    rows: &[Row],
    values: &[Vec<Vec<Result<f64, String>>>],
    quick: bool,
) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{}", crate::machine::describe(bins, quick));
    let mut head = "| # | Figure | Target | ".to_owned();
    head += &bins
        .iter()
        .map(|b| format!("{b}: median (range)"))
        .collect::<Vec<_>>()
        .join(" | ");
    if bins.len() > 1 {
        head += " | ratio";
    }
    head += " | Met |";
    let _ = writeln!(t, "{head}");
    let cols = 4 + bins.len() + usize::from(bins.len() > 1);
    let _ = writeln!(t, "|{}", "---|".repeat(cols));
    for (i, row) in rows.iter().enumerate() {
        if values.iter().all(|v| v[i].is_empty()) {
            continue;
        }
        let cells: Vec<(String, Option<f64>)> = values.iter().map(|v| cell(&v[i], row)).collect();
        let mut line = format!("| {} | {} | {} | ", row.figure, row.what, row.target);
        line += &cells
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<Vec<_>>()
            .join(" | ");
        if let [(_, Some(this)), (_, Some(base))] = cells.as_slice() {
            match *base != 0.0 {
                true => {
                    let _ = write!(line, " | {:.2}", this / base);
                }
                false => line += " | —",
            }
        } else if cells.len() > 1 {
            line += " | —";
        }
        let met = match (row.meets, cells[0].1) {
            (Some(meets), Some(m)) if meets(m) => "yes",
            (Some(_), Some(_)) => "**no**",
            _ => "—",
        };
        let _ = writeln!(t, "{line} | {met} |");
    }
    t
}
