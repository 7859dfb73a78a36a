//! Where a report was measured: the date, the commit, the CPU model and
//! core count, and each binary's build profile (read from its path under
//! `target/`), so a table says which machine and build it describes.

use std::path::Path;
use std::process::Command;

/// A command's trimmed output, when it ran and said something.
fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The CPU's model name, from `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The build profile of a binary cargo built: the name of the directory
/// it is in (`{target dir}/{profile}/hooklane`).
fn profile(bin: &str) -> String {
    Path::new(bin)
        .parent()
        .and_then(Path::file_name)
        .map_or_else(
            || "unknown profile".into(),
            |p| format!("{} profile", p.to_string_lossy()),
        )
}

/// The commit checked out in `dir`, with `-dirty` when its tree has
/// changes.
fn commit(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let dir = dir.to_string_lossy();
        let mut all = vec!["-C", dir.as_ref()];
        all.extend_from_slice(args);
        output("git", &all)
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    if dirty {
        format!("{head}-dirty")
    } else {
        head
    }
}

/// The commit of the checkout a binary was built in (the nearest
/// directory above it with a `.git`).
fn built_from(bin: &str) -> Option<String> {
    let path = std::fs::canonicalize(bin).ok()?;
    let checkout = path.ancestors().skip(1).find(|d| d.join(".git").exists())?;
    Some(commit(checkout))
}

/// The lines that head a report.
pub fn describe(bins: &[&str], quick: bool) -> String {
    let date =
        output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown date".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut text = format!(
        "Measured {date} on {} ({cores} cores), commit {}{}.\n",
        cpu_model(),
        commit(Path::new(".")),
        if quick {
            ", `--quick` (a smoke check: small workloads, not the figures)"
        } else {
            ""
        }
    );
    for bin in bins {
        let from = built_from(bin).map_or_else(String::new, |c| format!(", built at {c}"));
        text += &format!("- `{bin}`: {}{from}\n", profile(bin));
    }
    text
}
