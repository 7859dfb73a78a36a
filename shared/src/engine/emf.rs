//! CloudWatch embedded metric format (EMF): what a Lambda function's
//! engine counted during one batch, as one JSON log line CloudWatch turns
//! into metrics (no API call; the cost is the log line's). Counters go out
//! as the change since the last line; attempt durations and
//! publish-to-first-attempt latencies as their values (at most 100 each
//! per line, EMF's limit; beyond that a line carries the first 100 of the
//! batch). A batch that counted nothing prints nothing.

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::metrics::{Metrics, Samples};

/// The most values one metric carries in one EMF line.
pub const MAX_VALUES: usize = 100;

impl Metrics {
    /// Starts keeping the attempts' durations and latencies for
    /// [`Metrics::emf_line`].
    pub fn keep_samples(&self) {
        self.sampling.store(true, Ordering::Relaxed);
    }

    /// The counters EMF carries: (name, value now).
    fn emf_counters(&self) -> Vec<(&'static str, u64)> {
        let [retryable, permanent, fatal] = self.failures_by_class();
        self.counters()
            .iter()
            .map(|(_, _, name, c)| (*name, c.get()))
            .chain([
                ("FailedRetryable", retryable),
                ("FailedPermanent", permanent),
                ("FailedFatal", fatal),
            ])
            .collect()
    }

    /// One EMF line with what changed since the last one, under
    /// `namespace` with the dimension `Function`; `None` when nothing did.
    pub fn emf_line(&self, namespace: &str, function: &str, now: OffsetDateTime) -> Option<String> {
        // Read under the lock: two lines at once never count a change twice.
        let mut last = self.emf_last.lock().unwrap_or_else(|e| e.into_inner());
        let counters = self.emf_counters();
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        let mut root = Map::new();
        let mut defs = Vec::new();
        for (i, (name, now_value)) in counters.iter().enumerate() {
            let before = last.get(i).copied().unwrap_or(0);
            if *now_value > before {
                root.insert((*name).into(), json!(now_value - before));
                defs.push(json!({"Name": name, "Unit": "Count"}));
            }
        }
        *last = counters.iter().map(|(_, v)| *v).collect();
        let Samples {
            attempt_ms,
            first_attempt_ms,
        } = samples;
        for (name, values) in [
            ("AttemptDuration", attempt_ms),
            ("PublishToFirstAttempt", first_attempt_ms),
        ] {
            if !values.is_empty() {
                root.insert(name.into(), json!(values));
                defs.push(json!({"Name": name, "Unit": "Milliseconds"}));
            }
        }
        if defs.is_empty() {
            return None;
        }
        root.insert("Function".into(), json!(function));
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": (now.unix_timestamp_nanos() / 1_000_000) as i64,
                "CloudWatchMetrics": [{
                    "Namespace": namespace,
                    "Dimensions": [["Function"]],
                    "Metrics": defs,
                }],
            }),
        );
        Some(Value::Object(root).to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::AttemptResult;

    #[test]
    fn a_batch_makes_one_line_of_its_changes_and_a_quiet_one_none() {
        let m = Metrics::default();
        m.keep_samples();
        let now = OffsetDateTime::now_utc();
        for i in 0..150 {
            m.attempts.inc();
            let result = if i % 3 == 0 {
                AttemptResult::Timeout
            } else {
                AttemptResult::Response {
                    status: 204,
                    retry_after: None,
                }
            };
            m.attempt_ended(
                &result,
                Duration::from_millis(20),
                Some(Duration::from_millis(5)),
            );
        }
        m.parked.inc();
        let line: Value =
            serde_json::from_str(&m.emf_line("hooklane/test", "delivery", now).unwrap()).unwrap();
        assert_eq!(line["Attempts"], 150);
        assert_eq!(line["Parked"], 1);
        assert_eq!(line["FailedRetryable"], 50);
        assert!(
            line.get("Delivered").is_none(),
            "nothing delivered is not sent"
        );
        assert_eq!(
            line["AttemptDuration"].as_array().unwrap().len(),
            MAX_VALUES
        );
        assert_eq!(line["AttemptDuration"][0], 20.0);
        assert_eq!(line["Function"], "delivery");
        let cw = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], "hooklane/test");
        let ms = (now.unix_timestamp_nanos() / 1_000_000) as i64;
        assert_eq!(line["_aws"]["Timestamp"], ms, "milliseconds");
        assert_eq!(cw["Dimensions"], json!([["Function"]]));
        let names: Vec<&str> = cw["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["Name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"Attempts") && names.contains(&"PublishToFirstAttempt"));
        // Every named metric has its value at the root.
        assert!(names.iter().all(|n| line.get(*n).is_some()));
        // The next batch: only its own change.
        m.attempts.inc();
        let line: Value =
            serde_json::from_str(&m.emf_line("hooklane/test", "delivery", now).unwrap()).unwrap();
        assert_eq!(line["Attempts"], 1);
        assert!(line.get("AttemptDuration").is_none());
        assert_eq!(m.emf_line("hooklane/test", "delivery", now), None);
    }
}
