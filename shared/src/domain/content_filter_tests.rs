//! Unit tests of the content filter: each operator on a value that
//! matches and one that does not, missing paths, and refused filters.

use super::*;

fn event(data: &str) -> Json {
    filter_document(
        "invoice.paid",
        format!(r#"{{"type":"invoice.paid","timestamp":"t","data":{data}}}"#).as_bytes(),
    )
}

fn passes(filter: &str, data: &str) -> bool {
    ContentFilter::parse(filter)
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
        .matches(&event(data))
}

#[test]
fn each_operator_takes_one_event_and_refuses_another() {
    for (filter, yes, no) in crate::contract::FILTER_CASES {
        assert!(passes(filter, yes), "{filter} takes {yes}");
        assert!(!passes(filter, no), "{filter} refuses {no}");
    }
    assert!(passes(r#"{"type":{"$prefix":"invoice."}}"#, "{}"));
    assert!(!passes(r#"{"type":{"$prefix":"order."}}"#, "{}"));
}

#[test]
fn a_missing_path_matches_only_exists_false_neq_nin_and_not() {
    for (filter, takes) in [
        (r#"{"data":{"a":{"$exists":false}}}"#, true),
        (r#"{"data":{"a":{"$neq":1}}}"#, true),
        (r#"{"data":{"a":{"$nin":[1]}}}"#, true),
        (r#"{"data":{"a":{"$not":{"$eq":1}}}}"#, true),
        (r#"{"data":{"a":{"$eq":null}}}"#, false),
        (r#"{"data":{"a":null}}"#, false),
        (r#"{"data":{"a":{"$gte":0}}}"#, false),
        (r#"{"data":{"a":{"$in":[null]}}}"#, false),
        (r#"{"data":{"a":{"b":1}}}"#, false),
        (r#"{"data":{"a":{"$prefix":""}}}"#, false),
        (r#"{"data":{"a":{}}}"#, false),
    ] {
        assert_eq!(passes(filter, r#"{"z":1}"#), takes, "{filter}");
    }
    assert!(passes("{}", "{}"), "an empty filter takes everything");
}

#[test]
fn a_value_of_another_type_does_not_match_a_comparison() {
    assert!(!passes(
        r#"{"data":{"amount":{"$gte":1000}}}"#,
        r#"{"amount":"5000"}"#
    ));
    assert!(!passes(
        r#"{"data":{"amount":{"$lt":"9"}}}"#,
        r#"{"amount":5}"#
    ));
    assert!(passes(
        r#"{"data":{"amount":{"$gte":1000}}}"#,
        r#"{"amount":5000}"#
    ));
}

#[test]
fn big_integers_compare_exactly() {
    let f = r#"{"data":{"n":{"$gt":18446744073709551616}}}"#;
    assert!(
        passes(f, r#"{"n":18446744073709551617}"#),
        "2^64 + 1 > 2^64"
    );
    assert!(!passes(f, r#"{"n":18446744073709551616}"#));
    assert!(
        !passes(f, r#"{"n":1.8446744073709551616e19}"#),
        "the same value spelled so"
    );
    let eq = r#"{"data":{"n":18446744073709551617}}"#;
    assert!(!passes(eq, r#"{"n":18446744073709551616}"#));
}

#[test]
fn bad_filters_are_refused_with_the_reason() {
    let deep = format!(r#"{{"data":{}1{}}}"#, r#"{"a":"#.repeat(8), "}".repeat(8));
    let big = format!(
        r#"{{"data":{{"a":{{"$in":["{}"]}}}}}}"#,
        "x".repeat(MAX_FILTER_BYTES)
    );
    for (bad, why) in [
        (
            r#"{"data":{"a":{"$regex":"x"}}}"#,
            "unknown operator `$regex`",
        ),
        (
            r#"{"data":{"a":{"$gt":true}}}"#,
            "`$gt` takes a number or a string",
        ),
        (r#"{"data":{"a":{"$in":"x"}}}"#, "`$in` takes an array"),
        (
            r#"{"data":{"a":{"$exists":1}}}"#,
            "`$exists` takes true or false",
        ),
        (
            r#"{"data":{"a":{"$prefix":1}}}"#,
            "`$prefix` takes a string",
        ),
        (r#"{"$or":[]}"#, "`$or` takes a non-empty array of filters"),
        (
            r#"{"data":{"a":{"$eq":1,"b":2}}}"#,
            "at `data.a`: `$eq` compares the value itself, which has members (`b`)",
        ),
        (
            r#"{"data":{"a":{"$gt":{}}}}"#,
            "at `data.a.$gt`: `$gt` takes a number or a string",
        ),
        (
            r#"{"data":{"$or":[{"a":1},{"b":{"$in":3}}]}}"#,
            "at `data.$or[1].b.$in`: `$in` takes an array",
        ),
        (r#"{"$nope":1}"#, "at `$nope`: unknown operator"),
        (r#"{"timestamp":1}"#, "`timestamp` is neither"),
        ("[1]", "a JSON object"),
        ("{", "is not JSON"),
        (deep.as_str(), "8 levels"),
        (big.as_str(), "4096 bytes"),
    ] {
        let e = ContentFilter::parse(bad).expect_err(bad);
        assert!(e.0.contains(why), "{bad}: {e}");
    }
}

#[test]
fn members_beside_and_or_not_are_all_required_at_any_level() {
    // Three levels: the top, `data`, and `data.customer`, each holding
    // members beside a logical operator.
    let f = r#"{
        "type": {"$prefix": "invoice."},
        "$not": {"data": {"test": true}},
        "data": {
            "amount": {"$gte": 10},
            "$or": [{"vip": true}, {"tier": "gold"}],
            "customer": {"country": "DE", "$and": [{"age": {"$gte": 18}}, {"age": {"$lt": 65}}]}
        }
    }"#;
    let with = |amount: u32, vip: bool, tier: &str, age: u32, test: bool| {
        passes(
            f,
            &format!(
                r#"{{"amount":{amount},"vip":{vip},"tier":"{tier}","test":{test},"customer":{{"country":"DE","age":{age}}}}}"#
            ),
        )
    };
    assert!(with(10, true, "basic", 30, false), "all hold");
    assert!(with(10, false, "gold", 30, false), "$or by its second");
    assert!(!with(9, true, "gold", 30, false), "a member fails");
    assert!(!with(10, false, "basic", 30, false), "$or fails");
    assert!(!with(10, true, "gold", 70, false), "the nested $and fails");
    assert!(!with(10, true, "gold", 30, true), "the top's $not fails");
    assert!(!passes(
        f,
        r#"{"amount":10,"vip":true,"customer":{"country":"FR","age":30}}"#
    ));
}

#[test]
fn a_number_written_as_a_string_in_a_comparison_is_warned_of_with_its_path() {
    let f = ContentFilter::parse(
        r#"{"data":{"amount":{"$gte":"10"},"$or":[{"n":{"$lt":"2.5e3"}},{"code":{"$gte":"A1"}}],"id":"10"}}"#,
    )
    .unwrap();
    let w = f.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("at `data.$or[0].n.$lt`: \"2.5e3\" is a string"),
        "{w:?}"
    );
    assert!(
        w[1].starts_with("at `data.amount.$gte`: \"10\" is a string"),
        "{w:?}"
    );
    assert!(!passes(
        r#"{"data":{"amount":{"$gte":"10"}}}"#,
        r#"{"amount":50}"#
    ));
    let fine = ContentFilter::parse(r#"{"data":{"amount":{"$gte":10},"id":{"$eq":"10"}}}"#);
    assert!(fine.unwrap().warnings().is_empty());
}
