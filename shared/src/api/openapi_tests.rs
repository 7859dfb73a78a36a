//! Keeps `openapi.json` and the code from drifting: every route served is
//! documented and nothing else is; every body member and query parameter a
//! handler accepts is in the document's schema for that route and nothing
//! else is; and each documented pattern accepts exactly what the parser
//! behind it accepts, over a set of edge cases. (schemathesis, run by the
//! test command, checks the running server against the document.)

use std::collections::BTreeSet;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value;

use super::{
    attempts, body, dead_letters, event_list, input, subscriptions, OPENAPI, READS, ROUTES,
};
use crate::domain::{EventFilter, EventId, EventType, SubscriptionId};
use crate::signing::Secret;

const METHODS: [&str; 5] = ["get", "post", "patch", "delete", "put"];

fn doc() -> Value {
    serde_json::from_str(OPENAPI).expect("openapi.json parses")
}

/// Follows a local `$ref` (`#/components/...`) if `v` is one.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {r}")),
        None => v,
    }
}

fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    &doc["paths"][path][method]
}

/// The names of an operation's parameters `in` a place (path-level ones
/// included).
fn parameters(doc: &Value, method: &str, path: &str, place: &str) -> BTreeSet<String> {
    let item = &doc["paths"][path];
    let all = [&item["parameters"], &item[method]["parameters"]];
    all.iter()
        .filter_map(|p| p.as_array())
        .flatten()
        .map(|p| resolve(doc, p))
        .filter(|p| p["in"] == place)
        .map(|p| p["name"].as_str().expect("name").to_owned())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_openapi_document_lists_exactly_the_routes_served() {
    let doc = doc();
    let paths = doc["paths"].as_object().expect("paths");
    for (method, path) in ROUTES {
        assert!(
            paths.get(*path).and_then(|p| p.get(*method)).is_some(),
            "{method} {path} is served but not documented"
        );
    }
    let documented = paths
        .iter()
        .flat_map(|(path, item)| {
            METHODS
                .into_iter()
                .filter(|m| item.get(*m).is_some())
                .map(move |m| (m, path.as_str()))
        })
        .count();
    assert_eq!(
        documented,
        ROUTES.len(),
        "the document lists routes that are not served"
    );
}

#[test]
fn every_body_member_and_query_parameter_accepted_is_documented_and_no_other() {
    let doc = doc();
    for (method, path) in ROUTES {
        let reads = READS.iter().find(|r| r.0 == *method && r.1 == *path);
        let op = operation(&doc, method, path);
        let schema = op
            .pointer("/requestBody/content/application~1json/schema")
            .map(|s| resolve(&doc, s));
        match (reads.and_then(|r| r.2), schema) {
            (None, None) => {}
            (Some(fields), Some(schema)) => {
                let props: BTreeSet<String> = schema["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                assert_eq!(props, names(fields.allowed), "{method} {path} members");
                let required: BTreeSet<String> = schema["required"]
                    .as_array()
                    .map(|r| {
                        r.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                assert_eq!(required, names(fields.required), "{method} {path} required");
                assert_eq!(
                    schema["additionalProperties"],
                    Value::Bool(false),
                    "{method} {path}: other members are refused, so the schema must say so"
                );
            }
            (code, document) => panic!(
                "{method} {path}: the handler reads a body: {}, the document has one: {}",
                code.is_some(),
                document.is_some()
            ),
        }
        let query = reads.and_then(|r| r.3).map(|q| q.allowed).unwrap_or(&[]);
        assert_eq!(
            parameters(&doc, method, path, "query"),
            names(query),
            "{method} {path} query parameters"
        );
        let in_path: BTreeSet<String> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(str::to_owned)
            .collect();
        assert_eq!(
            parameters(&doc, method, path, "path"),
            in_path,
            "{method} {path} path parameters"
        );
    }
}

/// A documented string schema: its pattern (anchored) and length bounds.
struct Documented {
    pattern: regex_lite::Regex,
    min: usize,
    max: usize,
}

impl Documented {
    fn of(schema: &Value) -> Self {
        let pattern = schema["pattern"].as_str().expect("a pattern");
        assert!(
            pattern.starts_with('^') && pattern.ends_with('$'),
            "{pattern} is anchored"
        );
        let bound = |k: &str, d: usize| schema[k].as_u64().map_or(d, |n| n as usize);
        Self {
            pattern: regex_lite::Regex::new(pattern).expect("a pattern regex-lite reads"),
            min: bound("minLength", 0),
            max: bound("maxLength", usize::MAX),
        }
    }

    fn accepts(&self, s: &str) -> bool {
        let n = s.chars().count();
        self.pattern.is_match(s) && n >= self.min && n <= self.max
    }
}

/// Strings at the edges of every id, type, filter, cursor and secret rule.
fn samples() -> Vec<String> {
    let mut out: Vec<String> = [
        "",
        "a",
        ".",
        "..",
        "...",
        ".a",
        "..a",
        "a.",
        "a..b",
        "a.b",
        "a.*",
        "*",
        "a.b.*",
        "**",
        "a.**",
        ".*",
        "*.a",
        "a b",
        "a/b",
        "a:b",
        "a-b_c",
        "é",
        "a\n",
        "0",
        "42",
        "-1",
        "+1",
        "007",
        "sub_",
        "sub_a",
        "sub_a.b",
        "SUB_a",
        "evt_x",
        "att_x",
        "whsec_",
        "whsec_abc",
        "x:y.z-1_2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Sequence cursors: 19 digits below 9 × 10¹⁸ and at it, and 20.
    for n in [
        "8999999999999999999",
        "9000000000000000000",
        "10000000000000000000",
    ] {
        out.push(n.to_owned());
    }
    for n in [17, 18, 19, 20, 59, 60, 61, 63, 64, 65, 124, 127, 128, 129] {
        out.push("1".repeat(n));
        out.push("x".repeat(n));
        out.push(format!("sub_{}", "x".repeat(n)));
        out.push(format!("{}.*", "x".repeat(n)));
    }
    for n in [16, 23, 24, 25, 26, 27, 62, 63, 64, 65, 66] {
        let key: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
        let secret = format!("whsec_{}", STANDARD.encode(&key));
        out.push(secret.trim_end_matches('=').to_owned());
        // Non-canonical: the last character before the padding changed.
        if let Some(pos) = secret.find('=') {
            let mut odd = secret.clone();
            odd.replace_range(pos - 1..pos, "B");
            out.push(odd);
        }
        out.push(format!("{secret} "));
        out.push(secret);
    }
    out
}

/// Checks that `schema` accepts exactly the samples `parser` accepts.
fn agrees(what: &str, schema: &Value, parser: impl Fn(&str) -> bool) {
    let documented = Documented::of(schema);
    let wrong: Vec<String> = samples()
        .into_iter()
        .filter(|s| documented.accepts(s) != parser(s))
        .map(|s| {
            format!(
                "{s:?}: document {}, server {}",
                documented.accepts(&s),
                parser(&s)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{what} disagrees:\n{}", wrong.join("\n"));
}

fn cursor_of(path: &str, method: &str, query: &input::Query, doc: &Value) {
    let item = &doc["paths"][path][method]["parameters"];
    let param = item
        .as_array()
        .expect("parameters")
        .iter()
        .map(|p| resolve(doc, p))
        .find(|p| p["name"] == "cursor")
        .expect("a cursor parameter");
    agrees(&format!("{path} cursor"), &param["schema"], |s| {
        let q = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("cursor", s)
            .finish();
        input::page(Some(&q), query).is_ok()
    });
}

#[test]
fn every_documented_pattern_accepts_exactly_what_the_server_accepts() {
    let doc = doc();
    let schema = |p: &str| doc.pointer(p).unwrap_or_else(|| panic!("{p}")).clone();
    let params = "/components/parameters";
    let schemas = "/components/schemas";
    agrees("tenant", &schema(&format!("{params}/Tenant/schema")), |s| {
        input::tenant(s).is_ok()
    });
    agrees(
        "subscription id",
        &schema(&format!("{params}/SubscriptionId/schema")),
        |s| input::subscription_id(s).is_ok(),
    );
    agrees(
        "event id (path)",
        &schema(&format!("{params}/EventId/schema")),
        |s| input::event_id(s, "id").is_ok(),
    );
    agrees(
        "dead-letter subscription_id",
        &schema(&format!("{params}/SubscriptionIdQuery/schema")),
        |s| SubscriptionId::parse(s).is_ok(),
    );
    let publish = format!("{schemas}/EventPublish/properties");
    agrees("event type", &schema(&format!("{publish}/type")), |s| {
        EventType::parse(s).is_ok()
    });
    agrees("publish id", &schema(&format!("{publish}/id")), |s| {
        input::event_id(s, "id").is_ok() && EventId::parse(s).is_ok()
    });
    let create = format!("{schemas}/SubscriptionCreate/properties");
    agrees(
        "event type filter",
        &schema(&format!("{create}/event_types/items")),
        |s| EventFilter::parse(s).is_ok(),
    );
    agrees("secret", &schema(&format!("{create}/secret")), |s| {
        Secret::parse(s).is_ok()
    });
    let replay = format!("{schemas}/DeadLetterReplay/properties");
    agrees(
        "replay subscription_id",
        &schema(&format!("{replay}/subscription_id")),
        |s| SubscriptionId::parse(s).is_ok(),
    );
    agrees(
        "replay event id",
        &schema(&format!("{replay}/event_ids/items")),
        |s| input::event_id(s, "event_ids").is_ok(),
    );
    let v1 = "/v1/tenants/{tenant}";
    cursor_of(
        &format!("{v1}/subscriptions"),
        "get",
        &subscriptions::LIST_QUERY,
        &doc,
    );
    cursor_of(
        &format!("{v1}/subscriptions/{{id}}/attempts"),
        "get",
        &attempts::ATTEMPTS_QUERY,
        &doc,
    );
    cursor_of(
        &format!("{v1}/dead-letters"),
        "get",
        &dead_letters::LIST_QUERY,
        &doc,
    );
    cursor_of(
        &format!("{v1}/events"),
        "get",
        &event_list::LIST_QUERY,
        &doc,
    );
}

#[test]
fn documented_bounds_match_the_servers() {
    let doc = doc();
    let limit = &doc["components"]["parameters"]["Limit"]["schema"];
    assert_eq!(limit["minimum"], 1);
    assert_eq!(limit["maximum"], input::MAX_LIMIT);
    for n in [0, 1, input::MAX_LIMIT, input::MAX_LIMIT + 1] {
        let ok = input::page(Some(&format!("limit={n}")), &subscriptions::LIST_QUERY).is_ok();
        assert_eq!(ok, (1..=input::MAX_LIMIT).contains(&n), "limit={n}");
    }
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["DeadLetterReplay"]["properties"]["event_ids"]["maxItems"],
        dead_letters::MAX_REPLAY_IDS
    );
    let data = schemas["EventPublish"]["properties"]["data"]["description"]
        .as_str()
        .expect("data is described");
    assert!(
        data.contains(&format!("at most {} levels", body::MAX_DEPTH)),
        "the document states the nesting bound: {data}"
    );
    let publish = doc["paths"]["/v1/tenants/{tenant}/events"]["post"]["description"]
        .as_str()
        .expect("publish is described");
    assert!(publish.contains(&format!("{} KiB", body::MAX_BODY / 1024)));
}

#[test]
fn the_documents_version_is_the_builds() {
    assert_eq!(
        doc()["info"]["version"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "openapi.json's info.version and the workspace's version differ"
    );
}
