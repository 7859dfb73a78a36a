//! `hooklane dlq`'s unit tests: filters, the table it prints and the
//! confirmation it asks for.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn parse(argv: &str) -> Result<DlqCommand, clap::Error> {
    Cli::try_parse_from(format!("dlq {argv}").split(' ')).map(|c| c.args.command)
}

#[test]
fn filter_from_flags_treats_empty_lists_as_any() {
    let Ok(DlqCommand::List { select, max, .. }) = parse("list --subscription a --subscription b")
    else {
        panic!("list did not parse");
    };
    let (f, none) = (select.filter(), Select::default().filter());
    assert_eq!(max, 100);
    assert_eq!((f.tenant, f.events), (None, None));
    assert_eq!(f.subscriptions, Some(vec!["a".into(), "b".into()]));
    assert!(none.tenant.is_none() && none.subscriptions.is_none() && none.events.is_none());
}

#[test]
fn replay_needs_a_filter_or_all_and_not_both() {
    let Ok(DlqCommand::Replay { select, all, max }) = parse("replay") else {
        panic!("replay did not parse");
    };
    assert_eq!(max, 10_000);
    assert!(replay_filter(&select, all).is_err());
    assert!(replay_filter(&select, true).is_ok());
    let Ok(DlqCommand::Replay { select, all, .. }) = parse("replay --event e") else {
        panic!("replay --event did not parse");
    };
    assert!(replay_filter(&select, all).is_ok());
    assert!(parse("replay --all --tenant t").is_err());
}

#[test]
fn purge_refuses_without_yes_off_a_terminal_and_asks_for_the_word() {
    assert!(must_ask(false, false).is_err());
    assert!(must_ask(true, false).is_ok() && must_ask(false, true).is_ok());
    let mut out = Vec::new();
    assert!(ask(3, &mut &b"purge\n"[..], &mut out).unwrap_or(false));
    let prompt = String::from_utf8_lossy(&out);
    assert!(prompt.starts_with("Delete 3 parked deliveries? This cannot be undone."));
    assert!(!ask(3, &mut &b"yes\n"[..], &mut Vec::new()).unwrap_or(true));
    assert!(!ask(3, &mut &b""[..], &mut Vec::new()).unwrap_or(true));
}

#[test]
fn show_and_list_formatting() {
    let attrs = [("zeta", "z"), ("reason", "boom"), ("event_id", "old")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let base = [("message_id", "m".to_owned()), ("event_id", "e".to_owned())];
    let got = details(&base, &HashMap::from(attrs));
    let got: Vec<String> = got.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(got, ["message_id=m", "event_id=e", "reason=boom", "zeta=z"]);
    assert_eq!(shorten("a\nb", 60), "a b");
    let cut = shorten(&"x".repeat(100), 60);
    assert!(cut.chars().count() == 60 && cut.ends_with('…'));
    let row = ["s", "e", "t", "8", "500", "boom", "2024"].map(str::to_owned);
    let t = table(&[row]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].find("REASON"), lines[1].find("boom"));
}
