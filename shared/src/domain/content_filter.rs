//! A subscription's content filter (`../shared/API.md` "Endpoint
//! options"): a JSON document matched against an event's `{"type",
//! "data"}` at fan-out, after the event-type match, so an event it refuses
//! creates no delivery. Parsed once at the edge (bad filters are refused
//! naming `filter`), kept as its text, compiled again when read.
//!
//! An object matches when every member matches its value's member and
//! every operator (keys starting with `$`) matches the value itself. The
//! logical operators `$and`, `$or` and `$not` may stand beside members at
//! any level (`{"amount": {"$gte": 10}, "$or": [...]}` is the AND of all
//! three); a comparison beside members is refused, as no value is both an
//! object and a number. A refusal names the JSON path of the part at fault
//! (`data.amount.$gte`, `$or[1]`). A missing path matches only `$exists: false`, `$neq`,
//! `$nin`, and a `$not` of what it fails. Comparisons (`$gt` and the rest,
//! `$prefix`) match only a value of their operand's JSON type; numbers
//! compare by decimal value ([`Json`]).

use std::cmp::Ordering;

use super::json_tree::Json;
use super::Invalid;

/// The longest filter, in bytes of its JSON text.
pub const MAX_FILTER_BYTES: usize = 4096;
/// The deepest a filter's arrays and objects nest.
pub const MAX_FILTER_DEPTH: usize = 8;

/// A compiled content filter with its text.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentFilter {
    text: String,
    root: Node,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Each member against the value's member of that name, and every
    /// operator against the value itself.
    Object {
        members: Vec<(String, Node)>,
        ops: Vec<Op>,
    },
    /// Equal JSON.
    Equal(Json),
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(Json),
    Neq(Json),
    /// The value compared with the operand is one of these orderings.
    Compare(&'static [Ordering], Json),
    In(Vec<Json>),
    Nin(Vec<Json>),
    Exists(bool),
    Prefix(String),
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
}

fn invalid(why: impl Into<String>) -> Invalid {
    Invalid(why.into())
}

impl ContentFilter {
    /// Parses a filter given at the edge (or read back from the store).
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if text.len() > MAX_FILTER_BYTES {
            return Err(invalid(format!(
                "a filter is at most {MAX_FILTER_BYTES} bytes of JSON"
            )));
        }
        let doc = Json::parse(text).map_err(|e| invalid(format!("is not JSON: {e}")))?;
        if doc.depth() > MAX_FILTER_DEPTH {
            return Err(invalid(format!(
                "a filter nests at most {MAX_FILTER_DEPTH} levels deep"
            )));
        }
        let Json::Object(members) = &doc else {
            return Err(invalid("a filter is a JSON object (or null for none)"));
        };
        if let Some(k) = members
            .keys()
            .find(|k| !k.starts_with('$') && *k != "type" && *k != "data")
        {
            return Err(invalid(format!(
                "a filter matches the event's `type` and `data`; `{k}` is neither"
            )));
        }
        let mut warnings = Vec::new();
        warn(&doc, "", &mut warnings);
        Ok(Self {
            text: text.to_owned(),
            root: node(&doc, "")?,
            warnings,
        })
    }

    /// What in the filter is valid but likely not meant: a comparison
    /// whose operand is a number written as a string (`{"$gte": "10"}`),
    /// which matches string values only, never a number. Shown with the
    /// subscription (`warnings`), each naming its path.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The filter's JSON text, as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether an event passes, given its [`filter_document`].
    pub fn matches(&self, doc: &Json) -> bool {
        self.root.matches(Some(doc))
    }
}

/// The document a filter is matched against: `{"type", "data"}` of an
/// event's payload as published (`{"type", "timestamp", "data"}`).
pub fn filter_document(event_type: &str, payload: &[u8]) -> Json {
    let data = std::str::from_utf8(payload)
        .ok()
        .and_then(|text| {
            serde_json::from_str::<
                    std::collections::BTreeMap<String, &serde_json::value::RawValue>,
                >(text)
                .ok()
        })
        .and_then(|top| top.get("data").and_then(|d| Json::parse(d.get()).ok()));
    let mut doc = std::collections::BTreeMap::new();
    doc.insert("type".to_owned(), Json::String(event_type.to_owned()));
    if let Some(data) = data {
        doc.insert("data".to_owned(), data);
    }
    Json::Object(doc)
}

/// Collects [`ContentFilter::warnings`] of `j` at `path`.
fn warn(j: &Json, path: &str, out: &mut Vec<String>) {
    match j {
        Json::Object(members) => {
            for (k, v) in members {
                let here = join(path, k);
                let comparison = matches!(k.as_str(), "$gt" | "$gte" | "$lt" | "$lte");
                match v {
                    Json::String(s)
                        if comparison
                            && Json::parse(s).is_ok_and(|n| matches!(n, Json::Number(_))) =>
                    {
                        out.push(format!(
                            "at `{here}`: \"{s}\" is a string, so `{k}` matches string values only, \
                             compared as text, never a number; write {s} to compare numbers"
                        ));
                    }
                    _ => warn(v, &here, out),
                }
            }
        }
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                warn(item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `path` joined with a member's name, as the refusals spell paths.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A refusal of the part at `path`.
fn at(path: &str, why: impl std::fmt::Display) -> Invalid {
    if path.is_empty() {
        invalid(format!("at the top: {why}"))
    } else {
        invalid(format!("at `{path}`: {why}"))
    }
}

fn node(j: &Json, path: &str) -> Result<Node, Invalid> {
    let Json::Object(object) = j else {
        return Ok(Node::Equal(j.clone()));
    };
    let (mut members, mut ops) = (Vec::new(), Vec::new());
    for (k, v) in object {
        let here = join(path, k);
        if k.starts_with('$') {
            ops.push((k.as_str(), op(k, v, &here)?));
        } else {
            members.push((k.clone(), node(v, &here)?));
        }
    }
    if let (Some((name, _)), Some((member, _))) = (
        ops.iter()
            .find(|(_, o)| !matches!(o, Op::And(_) | Op::Or(_) | Op::Not(_))),
        members.first(),
    ) {
        return Err(at(
            path,
            format!(
                "`{name}` compares the value itself, which has members (`{member}`) here; \
                 only `$and`, `$or` and `$not` may stand beside members"
            ),
        ));
    }
    Ok(Node::Object {
        members,
        ops: ops.into_iter().map(|(_, o)| o).collect(),
    })
}

fn op(name: &str, operand: &Json, path: &str) -> Result<Op, Invalid> {
    use Ordering::{Equal, Greater, Less};
    let wrong = |takes: &str| at(path, format!("`{name}` takes {takes}"));
    let comparable = || match operand {
        Json::Number(_) | Json::String(_) => Ok(operand.clone()),
        _ => Err(wrong("a number or a string")),
    };
    let array = || match operand {
        Json::Array(a) => Ok(a.clone()),
        _ => Err(wrong("an array")),
    };
    let filters = || match operand {
        Json::Array(a) if !a.is_empty() => a
            .iter()
            .enumerate()
            .map(|(i, f)| node(f, &format!("{path}[{i}]")))
            .collect::<Result<Vec<_>, _>>(),
        _ => Err(wrong("a non-empty array of filters")),
    };
    Ok(match name {
        "$eq" => Op::Eq(operand.clone()),
        "$neq" => Op::Neq(operand.clone()),
        "$gt" => Op::Compare(&[Greater], comparable()?),
        "$gte" => Op::Compare(&[Greater, Equal], comparable()?),
        "$lt" => Op::Compare(&[Less], comparable()?),
        "$lte" => Op::Compare(&[Less, Equal], comparable()?),
        "$in" => Op::In(array()?),
        "$nin" => Op::Nin(array()?),
        "$exists" => match operand {
            Json::Bool(b) => Op::Exists(*b),
            _ => return Err(wrong("true or false")),
        },
        "$prefix" => match operand {
            Json::String(s) => Op::Prefix(s.clone()),
            _ => return Err(wrong("a string")),
        },
        "$and" => Op::And(filters()?),
        "$or" => Op::Or(filters()?),
        "$not" => Op::Not(Box::new(node(operand, path)?)),
        other => return Err(at(path, format!("unknown operator `{other}`"))),
    })
}

impl Node {
    fn matches(&self, value: Option<&Json>) -> bool {
        match self {
            // A missing path matches no object (`{}` included); each member
            // of a present one is matched against its own path.
            Self::Object { members, ops } if members.is_empty() && ops.is_empty() => {
                value.is_some()
            }
            Self::Object { members, ops } => {
                members
                    .iter()
                    .all(|(k, n)| n.matches(value.and_then(|v| v.member(k))))
                    && ops.iter().all(|op| op.matches(value))
            }
            Self::Equal(j) => value == Some(j),
        }
    }
}

impl Op {
    fn matches(&self, value: Option<&Json>) -> bool {
        match self {
            Self::Eq(j) => value == Some(j),
            Self::Neq(j) => value != Some(j),
            Self::Compare(wanted, operand) => {
                let order = match (value, operand) {
                    (Some(Json::Number(a)), Json::Number(b)) => a.cmp(b),
                    (Some(Json::String(a)), Json::String(b)) => a.cmp(b),
                    _ => return false,
                };
                wanted.contains(&order)
            }
            Self::In(list) => value.is_some_and(|v| list.contains(v)),
            Self::Nin(list) => !value.is_some_and(|v| list.contains(v)),
            Self::Exists(b) => value.is_some() == *b,
            Self::Prefix(p) => matches!(value, Some(Json::String(s)) if s.starts_with(p.as_str())),
            Self::And(nodes) => nodes.iter().all(|n| n.matches(value)),
            Self::Or(nodes) => nodes.iter().any(|n| n.matches(value)),
            Self::Not(n) => !n.matches(value),
        }
    }
}

#[cfg(test)]
#[path = "content_filter_tests.rs"]
mod tests;
