"""schemathesis hooks for the OpenAPI run of tests/fuzz/run.sh.

The server under test delivers the events the fuzzer publishes to the
subscriptions the fuzzer creates. Tests reach no network but loopback, so
in every request meant to be valid (the fuzzer's positive cases and the
examples) a subscription's `url` is replaced with a loopback address where
nothing listens: the value stays valid, so what is checked does not
change, and every delivery attempt ends on 127.0.0.1. Requests meant to be
invalid keep their `url`: the server must refuse them, and a refused
subscription delivers nothing.
"""

import datetime

import schemathesis

LOOPBACK = "http://127.0.0.1:9/fuzz"

# A content filter's grammar (operators and their operands, 8 levels, 4 KiB)
# is more than a JSON Schema the fuzzer can generate from says: a valid
# case's filter is this one.
FILTER = {"data": {"amount": {"$gte": 1000}, "currency": {"$in": ["usd", "eur"]}}}

# Header names hooklane sets itself; a valid case keeps one of each name
# whatever its case, and none of these.
RESERVED = {"host", "user-agent", "authorization", "connection", "transfer-encoding", "te"}


def usable_header(name, seen):
    lower = name.lower()
    if lower in RESERVED or lower.startswith(("webhook-", "content-")) or lower in seen:
        return False
    seen.add(lower)
    return True


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    meta = case.meta
    if meta is not None and not meta.generation.mode.is_positive:
        return
    if isinstance(case.body, dict) and isinstance(case.body.get("url"), str):
        case.body["url"] = LOOPBACK
    if isinstance(case.body, dict) and isinstance(case.body.get("filter"), dict):
        case.body["filter"] = FILTER
    # A recovery's window is within the archive's 14 days, which a schema
    # cannot say: a valid case recovers the last hour.
    if case.path.endswith("/recover") and isinstance(case.body, dict):
        hour_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
        case.body["since"] = hour_ago.isoformat().replace("+00:00", "Z")
        case.body.pop("until", None)
    if isinstance(case.body, dict) and isinstance(case.body.get("headers"), dict):
        seen = set()
        case.body["headers"] = {
            k: v for k, v in case.body["headers"].items() if usable_header(k, seen)
        }
    # An ordering key is at most 256 bytes of UTF-8, which a JSON Schema
    # length (in characters) cannot say: a valid case's key is cut to fit.
    key = case.body.get("ordering_key") if isinstance(case.body, dict) else None
    if isinstance(key, str) and len(key.encode("utf-8", "surrogatepass")) > 256:
        cut = key.encode("utf-8", "surrogatepass")[:256].decode(errors="ignore")
        case.body["ordering_key"] = cut or "k"
