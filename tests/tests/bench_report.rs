//! `hooklane-bench report --quick` (the command that writes BENCHMARKS.md's
//! results table) run on its small workload against the debug build: every
//! figure of the table is there, headed by the machine and the commit, and
//! every measured cell is a number in its unit, so the command cannot rot
//! unnoticed. What the numbers are is not asserted (a debug build on a
//! shared machine); figure 5 runs on the local AWS-compatible server from
//! `.venv`, as `tests/run.sh` installs it.

use std::path::Path;
use std::process::Command;

use hooklane_tests::child::{cargo_binary, hooklane_binary};

/// The figures the table has, in its order (figure 2 has two rows).
const FIGURES: [&str; 12] = [
    "1", "2", "2", "3", "3b", "4", "5", "7", "8", "10", "10b", "11",
];

/// A measured cell's number: `$1.23`, `1.00×`, `525/s`, `8.85 ms`.
fn number(cell: &str) -> Option<f64> {
    let first = cell.split_whitespace().next()?;
    let digits = first
        .trim_start_matches('$')
        .trim_end_matches('×')
        .trim_end_matches("/s");
    digits.parse().ok()
}

#[test]
fn the_quick_report_has_every_figure_and_each_parses() {
    let server = hooklane_binary();
    let bench = cargo_binary("hooklane-bench", &[]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let table_path = dir.path().join("report.md");
    let out = Command::new(&bench)
        .arg("--bin")
        .arg(&server)
        .args(["report", "--quick", "--out"])
        .arg(&table_path)
        .current_dir(&root)
        .output()
        .expect("hooklane-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let table = std::fs::read_to_string(&table_path).unwrap_or_default();
    assert!(out.status.success(), "report failed:\n{table}\n{stderr}");
    let head = table.lines().next().unwrap_or_default();
    for part in ["Measured ", " cores)", "commit ", "--quick"] {
        assert!(head.contains(part), "{part:?} in the heading: {head}");
    }
    assert!(table.contains("debug profile"), "{table}");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| # "))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let figures: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(figures, FIGURES, "{table}");
    for r in &rows {
        assert_eq!(r.len(), 5, "figure, what, target, value, met: {r:?}");
        assert!(
            number(r[3]).is_some(),
            "figure {}'s value parses: {r:?}",
            r[0]
        );
        let met = if r[2].starts_with("none") {
            vec!["—"]
        } else {
            vec!["yes", "**no**"]
        };
        assert!(met.contains(&r[4]), "figure {}'s met: {r:?}", r[0]);
    }
}
