//! What AWS bills for the calls hooklane makes, counted on the wire beside
//! the calls themselves ([`crate::calls`], `HOOKLANE_COUNT_AWS_CALLS=1`):
//! DynamoDB capacity units from the size of each item written or read, by
//! DynamoDB's size rules, and SQS requests by 64 KiB chunk.
//!
//! The rules, from the DynamoDB and SQS pricing documentation:
//! - An item's size is the sum over its attributes of the name's UTF-8
//!   bytes plus the value's size: a string its UTF-8 bytes, a binary its
//!   raw bytes, a number one byte per two significant digits plus one, a
//!   boolean or null one byte, a list or map three bytes plus its elements,
//!   each one byte more (a map's elements with their names); sets the sum
//!   of their members.
//! - A write is one unit per 1 KB of the item, rounded up per item (the
//!   larger of before and after); each global secondary index the item is
//!   in (both project every attribute) is written too. A transactional
//!   write costs twice.
//! - A strongly consistent read is one unit per 4 KB, rounded up per
//!   item for `GetItem` and over the page for `Query`; eventually
//!   consistent reads (every index read) cost half.
//! - SQS bills each 64 KiB chunk of a request's payload as one request.
//!
//! What the counter cannot see it estimates, and says so: the size before
//! an `UpdateItem` (the count takes the item after it, asked for with
//! `ReturnValues`), and the items of a transaction's updates (one unit
//! each, twice). The local AWS-compatible server reports
//! `ConsumedCapacity` as a constant per call (1 unit per write, 0.5 per
//! read, whatever the size), so the figures are computed here, not read
//! from it.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// The global secondary indexes of hooklane's table, by their key
/// attribute.
const INDEX_KEYS: [&str; 2] = ["gsi1pk", "gsi2pk"];

/// A DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// The size of a number: one byte per two significant digits, plus one.
fn number_size(n: &str) -> usize {
    let mantissa = n
        .trim_start_matches(['-', '+'])
        .split(['e', 'E'])
        .next()
        .unwrap_or("");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    significant.len().div_ceil(2) + 1
}

/// The size of a value (without its name).
pub fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(l) => 3 + l.iter().map(|e| value_size(e) + 1).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| k.len() + value_size(e) + 1)
                .sum::<usize>()
        }
        AttributeValue::Ss(ss) => ss.iter().map(String::len).sum(),
        AttributeValue::Ns(ns) => ns.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(bs) => bs.iter().map(|b| b.as_ref().len()).sum(),
        _ => 0,
    }
}

/// An item's size in bytes.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Write units of writing an item of `size` bytes (at least one).
pub fn write_units(size: usize) -> f64 {
    size.div_ceil(1024).max(1) as f64
}

/// Read units of reading `size` bytes in one item or one page.
pub fn read_units(size: usize, consistent: bool) -> f64 {
    let units = size.div_ceil(4096).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

/// Write units of writing `item` (of `size`, the larger of before and
/// after), its index entries included.
pub fn item_write_units(item: &Item, size: usize) -> f64 {
    write_units(size) * (1 + indexes_of(item)) as f64
}

/// How many global secondary indexes an item is in.
pub fn indexes_of(item: &Item) -> usize {
    INDEX_KEYS.iter().filter(|k| item.contains_key(**k)).count()
}

/// SQS requests a request of `payload` bytes is billed as.
pub fn sqs_requests(payload: usize) -> f64 {
    payload.div_ceil(64 * 1024).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    #[test]
    fn an_item_of_1024_bytes_is_one_write_unit_and_1025_two() {
        // "pk" (2) + "T#a" (3) + "v" (1) + value: 1,018 → 1,024 bytes.
        let mut item: Item = HashMap::from([
            ("pk".to_owned(), s("T#a")),
            ("v".to_owned(), s(&"x".repeat(1018))),
        ]);
        assert_eq!(item_size(&item), 1024);
        assert_eq!(item_write_units(&item, item_size(&item)), 1.0);
        item.insert("v".to_owned(), s(&"x".repeat(1019)));
        assert_eq!(item_size(&item), 1025);
        assert_eq!(item_write_units(&item, item_size(&item)), 2.0);
    }

    #[test]
    fn an_item_in_an_index_is_written_there_too() {
        let item: Item = HashMap::from([
            ("pk".to_owned(), s("D#s")),
            ("gsi1pk".to_owned(), s("V#t#e")),
            ("v".to_owned(), s(&"x".repeat(1500))),
        ]);
        // 1.5 KB: two units in the table, two in gsi1.
        assert_eq!(item_write_units(&item, item_size(&item)), 4.0);
        let both: Item = HashMap::from([
            ("gsi1pk".to_owned(), s("V#t#e")),
            ("gsi2pk".to_owned(), s("P#t")),
        ]);
        assert_eq!(item_write_units(&both, item_size(&both)), 3.0);
    }

    #[test]
    fn sizes_follow_the_rules_per_type() {
        // Numbers: significant digits, two to a byte, plus one.
        assert_eq!(number_size("0"), 1);
        assert_eq!(number_size("7"), 2);
        assert_eq!(number_size("1234"), 3);
        assert_eq!(number_size("-1700000000000"), 2);
        assert_eq!(number_size("0.00125"), 3);
        assert_eq!(value_size(&AttributeValue::Bool(true)), 1);
        // A map: 3 + per element (name + value + 1).
        let m = AttributeValue::M(HashMap::from([
            ("ab".to_owned(), s("xyz")),
            ("n".to_owned(), AttributeValue::N("42".into())),
        ]));
        assert_eq!(value_size(&m), 3 + (2 + 3 + 1) + (1 + 2 + 1));
        let l = AttributeValue::L(vec![s("a"), s("bc")]);
        assert_eq!(value_size(&l), 3 + 2 + 3);
        assert_eq!(
            value_size(&AttributeValue::Ss(vec!["a".into(), "bcd".into()])),
            4
        );
    }

    #[test]
    fn reads_round_per_four_kilobytes_and_eventual_reads_cost_half() {
        assert_eq!(read_units(1, true), 1.0);
        assert_eq!(read_units(4096, true), 1.0);
        assert_eq!(read_units(4097, true), 2.0);
        assert_eq!(read_units(4097, false), 1.0);
        assert_eq!(read_units(0, false), 0.5);
    }

    #[test]
    fn sqs_bills_each_64_kib_chunk() {
        assert_eq!(sqs_requests(1), 1.0);
        assert_eq!(sqs_requests(65_536), 1.0);
        assert_eq!(sqs_requests(65_537), 2.0);
        assert_eq!(sqs_requests(256 * 1024), 4.0);
    }
}
