#!/usr/bin/env bash
# The OpenAPI fuzz run, part of tests/run.sh (which installs schemathesis
# into .venv from tests/requirements.txt first; runnable alone after that):
# builds `hooklane`, serves it on the embedded backend on a loopback port
# over a temporary database, and runs schemathesis with every check against
# the document the server itself serves at /openapi.json. Any finding fails
# the run. The seed and the number of cases per operation are fixed, so a
# run is repeatable and takes a few minutes on two cores. One worker: with
# several, hypothesis parses lambdas' source on two threads at once, which
# Python 3.11 can fail at ("AST constructor recursion depth mismatch").
#   HOOKLANE_FUZZ_EXAMPLES  cases per operation and phase (default 100)
#   HOOKLANE_FUZZ_SEED      the seed (default HOOKLANE_TEST_SEED, or else fixed)
#   HOOKLANE_FUZZ_BIN       a `hooklane` binary to check instead of building one
set -euo pipefail
cd "$(dirname "$0")/../.."

bin="${HOOKLANE_FUZZ_BIN:-target/debug/hooklane}"
if [ -z "${HOOKLANE_FUZZ_BIN:-}" ]; then
  cargo build -p hooklane --locked
fi
. tests/serve_helpers.sh
mkdir -p target
dir=$(mktemp -d)
port=$(free_port)
token="fuzz-token-0123456789abcdef"
HOOKLANE_API_TOKEN="$token" HOOKLANE_ALLOW_HTTP=true HOOKLANE_ALLOW_PRIVATE_TARGETS=true \
  RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --db "$dir/fuzz.db" \
  > target/fuzz-serve.log 2>&1 &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_up "hooklane serve on 127.0.0.1:$port" target/fuzz-serve.log url_up "http://127.0.0.1:$port/healthz"

PYTHONPATH=tests/fuzz SCHEMATHESIS_HOOKS=hooks .venv/bin/schemathesis run \
  "http://127.0.0.1:$port/openapi.json" \
  --checks all \
  --header "Authorization: Bearer $token" \
  --max-examples "${HOOKLANE_FUZZ_EXAMPLES:-100}" \
  --seed "${HOOKLANE_FUZZ_SEED:-${HOOKLANE_TEST_SEED:-20261201}}" \
  --generation-database none \
  --workers 1 \
  --request-timeout 30 \
  --no-color
