//! The embedded database's schema, applied at open (idempotent).

use rusqlite::Connection;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    read_only INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys (tenant, id);

CREATE TABLE IF NOT EXISTS event_types (
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    example TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
);

CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE IF NOT EXISTS subscriptions (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    url TEXT NOT NULL,
    filters TEXT NOT NULL,
    description TEXT,
    metadata TEXT NOT NULL,
    secret TEXT NOT NULL,
    prev_secret TEXT,
    prev_secret_expires_at INTEGER,
    status TEXT NOT NULL,
    health TEXT NOT NULL,
    suspended_at INTEGER,
    status_reason TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deleted_at INTEGER
);
CREATE INDEX IF NOT EXISTS subscriptions_by_tenant ON subscriptions (tenant, id);

CREATE TABLE IF NOT EXISTS subscription_filters (
    tenant TEXT NOT NULL,
    filter TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    PRIMARY KEY (tenant, filter, subscription_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS subscription_filters_by_sub ON subscription_filters (subscription_id);

CREATE TABLE IF NOT EXISTS events (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS events_by_time ON events (created_at);
CREATE INDEX IF NOT EXISTS events_by_tenant_time ON events (tenant, created_at, id);

CREATE TABLE IF NOT EXISTS backfill_jobs (
    subscription_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    until_at INTEGER NOT NULL,
    cursor_at INTEGER NOT NULL,
    cursor_id TEXT NOT NULL DEFAULT '',
    started_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS fanout_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    event_id TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER,
    last_attempt_at INTEGER,
    next_attempt_at INTEGER NOT NULL,
    last_status INTEGER,
    last_error TEXT,
    reason TEXT,
    parked_at INTEGER,
    updated_at INTEGER NOT NULL,
    lane TEXT NOT NULL DEFAULT 'live'
);
CREATE UNIQUE INDEX IF NOT EXISTS deliveries_once ON deliveries (subscription_id, event_id);
CREATE INDEX IF NOT EXISTS deliveries_by_event ON deliveries (tenant, event_id);

CREATE TABLE IF NOT EXISTS attempts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status_code INTEGER,
    outcome TEXT NOT NULL,
    error TEXT,
    response_excerpt TEXT
);
CREATE INDEX IF NOT EXISTS attempts_by_sub ON attempts (tenant, subscription_id, seq);
CREATE INDEX IF NOT EXISTS attempts_by_time ON attempts (started_at);
"#;

/// Columns added after the first release, to tables that may already
/// exist without them: (table, column, definition).
const ADDED: &[(&str, &str, &str)] = &[
    ("subscriptions", "lanes", "INTEGER NOT NULL DEFAULT 1"),
    ("subscriptions", "rate_limit", "INTEGER"),
    // Endpoint options (headers, auth, content filter) as one JSON document.
    ("subscriptions", "options", "TEXT"),
    ("events", "ordering_key", "TEXT"),
    // The publish span's `traceparent`, when traces were on.
    ("events", "traceparent", "TEXT"),
    // A test event's one subscription (`POST …/subscriptions/{id}/test`).
    ("events", "only_for", "TEXT"),
    // A delivery's lane among its subscription's lanes, and the hash of
    // its event's ordering key (NULL without one): a lane head waits for
    // older pending deliveries of its key on other lanes (G5).
    ("deliveries", "lane_no", "INTEGER NOT NULL DEFAULT 0"),
    ("deliveries", "key_hash", "INTEGER"),
    // The response's headers in the attempt log (NULL in older entries).
    ("attempts", "response_headers", "TEXT"),
    // The event's type in the attempt log (NULL in older entries).
    ("attempts", "event_type", "TEXT"),
    // When a delivery was queued, for the age of the oldest pending one
    // (rows older than the column get their first attempt's time, or
    // their last change's: [`FILLED`]).
    ("deliveries", "enqueued_at", "INTEGER"),
];

/// What an added column's existing rows get when it is added: (table,
/// column, statement).
const FILLED: &[(&str, &str, &str)] = &[(
    "deliveries",
    "enqueued_at",
    "UPDATE deliveries SET enqueued_at = COALESCE(first_attempt_at, updated_at) \
     WHERE state = 'pending'",
)];

/// Indexes over the added columns, and those replaced since the first
/// release. Those whose readers ask for one state only are partial: the
/// pending rows of a key and of a tenant (the backlog), and the parked rows
/// (the dead letters). A delivery's end then leaves the pending ones and
/// enters no partial index; only its entry in `deliveries_lane_no` moves.
/// Every index page touched counts: each commit writes them all to the
/// WAL, and the writer commits often (a delivery's start and its end are
/// two writes).
const ADDED_INDEXES: &str = r#"
DROP INDEX IF EXISTS deliveries_lane;
CREATE INDEX IF NOT EXISTS deliveries_lane_no ON deliveries (subscription_id, lane, lane_no, state, seq);
CREATE INDEX IF NOT EXISTS deliveries_by_key ON deliveries (subscription_id, key_hash, seq)
    WHERE key_hash IS NOT NULL AND state = 'pending';
CREATE INDEX IF NOT EXISTS deliveries_pending ON deliveries (tenant, seq) WHERE state = 'pending';
DROP INDEX IF EXISTS deliveries_parked;
CREATE INDEX IF NOT EXISTS deliveries_parked_only ON deliveries (tenant, seq) WHERE state = 'parked';
CREATE INDEX IF NOT EXISTS subscriptions_suspended ON subscriptions (suspended_at, id)
    WHERE status = 'suspended' AND deleted_at IS NULL;
"#;

/// Creates the tables, columns and indexes that are missing.
pub(super) fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute_batch(SCHEMA)?;
    for (table, column, definition) in ADDED {
        let present: bool = tx.query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM pragma_table_info('{table}') WHERE name = ?1)"),
            [column],
            |r| r.get(0),
        )?;
        if !present {
            tx.execute_batch(&format!(
                "ALTER TABLE {table} ADD COLUMN {column} {definition}"
            ))?;
            for (_, _, fill) in FILLED.iter().filter(|f| (f.0, f.1) == (*table, *column)) {
                tx.execute_batch(fill)?;
            }
        }
    }
    tx.execute_batch(ADDED_INDEXES)?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OptionalExtension};

    use crate::sqlite::{open_conn, overview, views, SqliteStore};

    /// The plan SQLite makes for `sql`, one step per line.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Planned with its parameters unbound.
        let mut rows = stmt.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    /// The definition of index `name`, if there is one.
    fn index_sql(conn: &Connection, name: &str) -> Option<String> {
        conn.query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()
        .unwrap()
    }

    #[test]
    fn reads_of_one_delivery_state_use_that_states_partial_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        drop(SqliteStore::open(&path).unwrap());
        let conn = open_conn(&path).unwrap();
        let parked = index_sql(&conn, "deliveries_parked_only").expect("the parked index");
        assert!(parked.ends_with("WHERE state = 'parked'"), "{parked}");
        assert_eq!(index_sql(&conn, "deliveries_parked"), None);
        for (what, sql, index) in [
            (
                "dead letters",
                views::DEAD_LETTERS,
                "deliveries_parked_only",
            ),
            ("parked counts", overview::PARKED, "deliveries_parked_only"),
            ("backlog", overview::BACKLOG, "deliveries_pending"),
        ] {
            let plan = plan(&conn, sql);
            assert!(plan.contains(index), "{what}: {plan}");
            let scans = plan
                .lines()
                .any(|l| matches!(l.trim(), "SCAN deliveries" | "SCAN d"));
            assert!(!scans, "{what} reads the whole table: {plan}");
        }
    }

    #[test]
    fn a_database_with_the_full_parked_index_has_it_replaced_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        drop(SqliteStore::open(&path).unwrap());
        // The index as the first releases made it, over every row.
        open_conn(&path)
            .unwrap()
            .execute_batch(
                "DROP INDEX deliveries_parked_only; \
                 CREATE INDEX deliveries_parked ON deliveries (tenant, state, seq);",
            )
            .unwrap();
        drop(SqliteStore::open(&path).unwrap());
        let conn = open_conn(&path).unwrap();
        assert_eq!(index_sql(&conn, "deliveries_parked"), None);
        assert!(index_sql(&conn, "deliveries_parked_only").is_some());
    }
}
