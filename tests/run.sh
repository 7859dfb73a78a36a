#!/usr/bin/env bash
# The one test command (README, CI). It installs what the tests need and
# starts it, then runs everything:
#   - Python tools into .venv from PyPI (tests/requirements.txt): moto, the
#     local AWS-compatible server, cfn-lint for infra/template.yaml,
#     schemathesis, and the SAM CLI with cargo-lambda;
#   - moto in server mode on 127.0.0.1 (stopped on exit), through
#     tests/moto_server.py, which makes its DynamoDB item writes atomic;
#   - the fast pair, dynoxide from crates.io (into target/tools) and
#     ministack from PyPI (tests/requirements-ministack.txt, into
#     .venv-ministack), on 127.0.0.1 (stopped on exit): no queue of
#     calls, for the burst promise and a second run of the AWS tests;
#   - cargo fmt --check, the source layout (tests/layout.py: no file over
#     400 lines, no import circle in shared/aws), the Markdown's relative
#     links (tests/links.py), clippy -D warnings, then
#     every unit, contract and end-to-end test of the workspace (crates
#     come from crates.io);
#   - schemathesis against `hooklane serve` and its /openapi.json
#     (tests/fuzz/run.sh): any finding fails;
#   - the tenant portal in a real browser: Chromium from Debian's packages
#     (installed when missing) driven by Playwright from PyPI
#     (tests/browser/portal_test.py), on both backends, screenshots in
#     target/portal-screenshots and target/portal-screenshots-aws;
#   - the template's deploy-time rules that neither cfn-lint nor the local
#     stand-in checks (tests/deploy/rules.py, with a test breaking each);
#   - the README's deploy build: `sam validate --lint` and
#     `sam build --beta-features` in infra/ (cargo-lambda cross-compiles the
#     four functions, the slow pool's from the delivery binary; no Docker),
#     checking that four bootstraps come out;
#   - the first deploy, to the local stand-in: `sam package` into moto's S3,
#     the SAM transform by aws-sam-translator, the stack created on moto's
#     CloudFormation in each of the template's modes and its services'
#     state checked (tests/deploy/stack.py); the AWS tests that take a
#     stack (tests/src/stack.rs) create theirs the same way.
# Receivers are started by the tests themselves, on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== python tools (.venv)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt

echo "== chromium (Debian's package, for the portal's browser test)"
if ! command -v chromium > /dev/null; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium > /dev/null
fi

echo "== cfn-lint infra/template.yaml; the deploy-time rules (tests/deploy/rules.py)"
.venv/bin/cfn-lint infra/template.yaml
.venv/bin/python tests/deploy/rules.py
.venv/bin/python -m unittest discover -s tests/deploy -p '*_test.py'

. tests/serve_helpers.sh

echo "== moto server"
mkdir -p target
port=$(free_port)
# moto's own server, with each DynamoDB item operation applied whole as
# DynamoDB applies it (tests/moto_server.py says why).
.venv/bin/python tests/moto_server.py -H 127.0.0.1 -p "$port" > target/moto.log 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true' EXIT
wait_up "moto on 127.0.0.1:$port" target/moto.log url_up "http://127.0.0.1:$port/moto-api/"
export HOOKLANE_TEST_AWS_ENDPOINT="http://127.0.0.1:$port"

echo "== the fast pair: dynoxide (crates.io) for DynamoDB, ministack (PyPI) for SQS and SNS"
# Two servers where a burst's calls do not wait in one queue, as on AWS
# (moto's do): ministack answers in parallel, dynoxide one call at a time in
# microseconds. The burst promise is tested on them, and the AWS end-to-end
# tests run on them as well as on moto. Pinned; cargo install does nothing
# when that version is in target/tools already. ministack has a Python
# environment of its own (it pins a botocore the SAM CLI's does not take).
cargo install dynoxide-rs --version 3.2.0 --locked --quiet --no-default-features \
  --features native-sqlite,http-server,cli --root target/tools
if [ ! -x .venv-ministack/bin/python ]; then
  python3 -m venv .venv-ministack
fi
.venv-ministack/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-ministack.txt
ddb_port=$(free_port)
sqs_port=$(free_port)
target/tools/bin/dynoxide --host 127.0.0.1 --port "$ddb_port" --log quiet > target/dynoxide.log 2>&1 &
dynoxide_pid=$!
GATEWAY_PORT="$sqs_port" BIND_HOST=127.0.0.1 SERVICES=sqs,sns LOG_LEVEL=WARNING \
  .venv-ministack/bin/ministack > target/ministack.log 2>&1 &
ministack_pid=$!
trap 'kill "$moto_pid" "$dynoxide_pid" "$ministack_pid" 2>/dev/null || true' EXIT
fast_up() {
  target/tools/bin/dynoxide healthcheck --port "$ddb_port" --timeout 1 > /dev/null 2>&1 &&
    url_up "http://127.0.0.1:$sqs_port/_ministack/health"
}
wait_up "the fast pair (dynoxide on $ddb_port, ministack on $sqs_port)" \
  "target/dynoxide.log target/ministack.log" fast_up
export HOOKLANE_TEST_DYNAMODB_ENDPOINT="http://127.0.0.1:$ddb_port"
export HOOKLANE_TEST_SQS_ENDPOINT="http://127.0.0.1:$sqs_port"

# One-shot builds: incremental caches would only take disk.
export CARGO_INCREMENTAL=0

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== source layout (no file over 400 lines, no function over 60, no import circle in shared/aws)"
.venv/bin/python tests/layout.py

echo "== links in the Markdown (tests/links.py: every relative link and #anchor leads somewhere)"
.venv/bin/python tests/links.py
.venv/bin/python -m unittest discover -s tests -p 'links_test.py'

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked --features hooklane/aws -- -D warnings
# The command without its AWS backend (the README's first command builds
# it so) must build, pass its lints and its own tests too.
cargo clippy -p hooklane --all-targets --locked -- -D warnings
cargo test -p hooklane --locked

echo "== sam validate --lint; sam build --beta-features (infra/)"
export SAM_CLI_TELEMETRY=0
rm -rf infra/.aws-sam
(
  cd infra
  PATH="$PWD/../.venv/bin:$PATH" sam validate --lint
  PATH="$PWD/../.venv/bin:$PATH" CARGO_PROFILE_RELEASE_OPT_LEVEL=z sam build --beta-features
)
# Each function's bootstrap, where the built template's CodeUri puts it (the
# two delivery functions share one build: DeliveryFunction-Shared).
for f in ApiFunction FanoutFunction DeliveryFunction SlowDeliveryFunction; do
  dir=$(awk -v f="  $f:" '$0 == f {found = 1} found && /CodeUri:/ {print $2; exit}' infra/.aws-sam/build/template.yaml)
  if [ -z "$dir" ] || [ ! -x "infra/.aws-sam/build/$dir/bootstrap" ]; then
    echo "sam build left no bootstrap for $f" >&2
    exit 1
  fi
  ls -l "infra/.aws-sam/build/$dir/bootstrap" | awk -v f="$f" '{printf "%-21s bootstrap %8.2f MiB\n", f, $5 / 1048576}'
done

echo "== deploy the template to the local stand-in (tests/deploy/stack.py)"
# sam package uploads what sam build made to the stand-in's S3 (named
# localhost: the packaged template's S3 addresses are made from it); each
# of the template's modes is translated with aws-sam-translator and
# created on moto's CloudFormation, and the queues, table, functions,
# environments and event source mappings are read back and checked.
.venv/bin/python tests/deploy/stack.py package --endpoint "http://localhost:$port"
.venv/bin/python tests/deploy/stack.py check --endpoint "http://localhost:$port"

echo "== cargo test (the AWS tests on moto; the stacks' and the burst promise's name their stand-in)"
cargo test --workspace --all-targets --locked --features hooklane/aws

echo "== the AWS tests again, on the fast pair (HOOKLANE_TEST_STANDIN=fast)"
# Every end-to-end test's `aws::` case, and the AWS-only test files (the
# burst promise ran on the fast pair already).
HOOKLANE_TEST_STANDIN=fast cargo test --workspace --tests --locked --features hooklane/aws -- aws::
HOOKLANE_TEST_STANDIN=fast cargo test --workspace --locked --features hooklane/aws \
  --test aws_burst --test aws_faults --test aws_races --test aws_reads --test aws_retention \
  --test tenant_backlog_aws --test slow_pool -- --skip past_3_s --skip burst_promise

echo "== schemathesis against serve's OpenAPI document"
tests/fuzz/run.sh

echo "== the tenant portal in Chromium (tests/browser/portal_test.py)"
cargo build -p hooklane --features aws --locked
started=$(date +%s)
.venv/bin/python tests/browser/portal_test.py target/portal-screenshots
.venv/bin/python tests/browser/portal_test.py target/portal-screenshots-aws aws
echo "browser tests took $(( $(date +%s) - started )) s"

