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

import schemathesis

LOOPBACK = "http://127.0.0.1:9/fuzz"


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    meta = case.meta
    if meta is not None and not meta.generation.mode.is_positive:
        return
    if isinstance(case.body, dict) and isinstance(case.body.get("url"), str):
        case.body["url"] = LOOPBACK
    # An ordering key is at most 256 bytes of UTF-8, which a JSON Schema
    # length (in characters) cannot say: a valid case's key is cut to fit.
    key = case.body.get("ordering_key") if isinstance(case.body, dict) else None
    if isinstance(key, str) and len(key.encode("utf-8", "surrogatepass")) > 256:
        cut = key.encode("utf-8", "surrogatepass")[:256].decode(errors="ignore")
        case.body["ordering_key"] = cut or "k"
