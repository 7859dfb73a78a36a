//! Faults aimed at one kind of call: every call whose body holds all of
//! a rule's needles fails (`FaultProxy::fail_when`), waits until the test
//! lets it through (`FaultProxy::hold_when`), or is only counted
//! (`FaultProxy::watch`), for as long as the rule stands. Where the seeded draws of the proxy test what any call may
//! meet, these put one call's failure, or one call's lateness, exactly
//! where a test needs it (a count's take-off that fails, a count written
//! after the take-off it should precede).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// What a rule does to the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Answer 500 `InternalServerError` without forwarding.
    Fail,
    /// Forward once the rule is lifted.
    Hold,
    /// Forward, and count the answer.
    Watch,
}

/// One standing rule; lifted by [`Rule::lift`].
pub struct Rule {
    needles: Vec<String>,
    action: Action,
    standing: watch::Sender<bool>,
    matched: AtomicU64,
    answered: AtomicU64,
}

impl Rule {
    /// Calls matched so far (a held call counts when it arrives).
    pub fn matched(&self) -> u64 {
        self.matched.load(Ordering::SeqCst)
    }

    /// Matched calls forwarded and answered so far, whatever the answer
    /// (not those a later `fail_when` rule failed).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::SeqCst)
    }

    /// Ends the rule: held calls go on, later ones pass untouched.
    pub fn lift(&self) {
        self.standing.send_replace(false);
    }
}

/// The proxy's rules.
#[derive(Default)]
pub(super) struct Rules(Mutex<Vec<Arc<Rule>>>);

impl Rules {
    pub(super) fn add(&self, needles: &[&str], action: Action) -> Arc<Rule> {
        let rule = Arc::new(Rule {
            needles: needles.iter().map(|n| (*n).to_owned()).collect(),
            action,
            standing: watch::channel(true).0,
            matched: AtomicU64::new(0),
            answered: AtomicU64::new(0),
        });
        self.0.lock().expect("the rules").push(rule.clone());
        rule
    }

    /// Applies the standing rules to a call's body: `Err(())` when it is to
    /// fail, else the rules to tell of its answer ([`Self::answered`]); a
    /// held call returns once its rule is lifted.
    pub(super) async fn apply(&self, body: &[u8]) -> Result<Vec<Arc<Rule>>, ()> {
        let text = String::from_utf8_lossy(body);
        let matching: Vec<Arc<Rule>> = match self.0.lock() {
            Ok(rules) => rules
                .iter()
                .filter(|r| *r.standing.borrow())
                .filter(|r| r.needles.iter().all(|n| text.contains(n.as_str())))
                .cloned()
                .collect(),
            Err(_) => return Ok(Vec::new()),
        };
        for rule in &matching {
            rule.matched.fetch_add(1, Ordering::SeqCst);
            match rule.action {
                Action::Fail => return Err(()),
                Action::Hold => {
                    let mut standing = rule.standing.subscribe();
                    let _ = standing.wait_for(|on| !*on).await;
                }
                Action::Watch => {}
            }
        }
        Ok(matching)
    }

    /// Tells the rules a call matched that its answer came.
    pub(super) fn answered(matched: &[Arc<Rule>]) {
        for rule in matched {
            rule.answered.fetch_add(1, Ordering::SeqCst);
        }
    }
}
