//! The kinds of operator event (`../shared/API.md`, "Operator events") and
//! the set a deployment sends (`HOOKLANE_OPERATOR_EVENTS`). The engine's
//! [`crate::engine`] sends them; this is only their names.

/// A kind of operator event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorEvent {
    /// A subscription was suspended (G8).
    Suspended,
    /// A delivery was parked in the dead-letter queue.
    Parked,
    /// A subscription that had failed for a while delivered again.
    Recovered,
    /// The probe of an `enable` failed.
    ProbeFailed,
}

impl OperatorEvent {
    /// Every kind, in the order of their bits.
    pub const ALL: [Self; 4] = [
        Self::Suspended,
        Self::Parked,
        Self::Recovered,
        Self::ProbeFailed,
    ];

    /// The event type it is sent as.
    pub fn name(self) -> &'static str {
        match self {
            Self::Suspended => "subscription.suspended",
            Self::Parked => "delivery.parked",
            Self::Recovered => "subscription.recovered",
            Self::ProbeFailed => "subscription.probe_failed",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The operator events a deployment sends: all by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorEvents(u8);

impl Default for OperatorEvents {
    fn default() -> Self {
        Self(OperatorEvent::ALL.iter().map(|e| e.bit()).sum())
    }
}

impl OperatorEvents {
    /// Parses a comma list of event types (`delivery.parked,
    /// subscription.suspended`); an empty list sends none.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut set = 0u8;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let kind = OperatorEvent::ALL
                .into_iter()
                .find(|e| e.name() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = OperatorEvent::ALL.iter().map(|e| e.name()).collect();
                    format!(
                        "unknown operator event `{name}` (known: {})",
                        known.join(", ")
                    )
                })?;
            set |= kind.bit();
        }
        Ok(Self(set))
    }

    /// Whether `kind` is sent.
    pub fn sends(self, kind: OperatorEvent) -> bool {
        self.0 & kind.bit() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_chooses_its_kinds_and_an_unknown_name_is_refused() {
        let all = OperatorEvents::default();
        assert!(OperatorEvent::ALL.iter().all(|e| all.sends(*e)));
        let two = OperatorEvents::parse(" delivery.parked, subscription.recovered ,").unwrap();
        assert!(two.sends(OperatorEvent::Parked) && two.sends(OperatorEvent::Recovered));
        assert!(!two.sends(OperatorEvent::Suspended) && !two.sends(OperatorEvent::ProbeFailed));
        let none = OperatorEvents::parse("").unwrap();
        assert!(OperatorEvent::ALL.iter().all(|e| !none.sends(*e)));
        let err = OperatorEvents::parse("delivery.parked,delivery.failed").unwrap_err();
        assert!(err.contains("delivery.failed") && err.contains("subscription.probe_failed"));
    }
}
