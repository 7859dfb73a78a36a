#!/usr/bin/env bash
# Deployment check (not part of the test command: it builds three release
# binaries, which takes minutes): lints the SAM template and builds every
# Lambda function with cargo-lambda, as `sam build` would, then prints each
# binary's size. cargo-lambda and cfn-lint come from PyPI into .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:---x86-64}"   # or --arm64

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt cargo-lambda==1.9.2
export PATH="$PWD/.venv/bin:$PATH"

echo "== cfn-lint infra/template.yaml"
cfn-lint infra/template.yaml

echo "== cargo lambda build --profile lambda $arch"
cargo lambda build --profile lambda "$arch" -p hooklane-api -p hooklane-fanout -p hooklane-delivery

for f in hooklane-api hooklane-fanout hooklane-delivery; do
  ls -l "target/lambda/$f/bootstrap" | awk -v f="$f" '{printf "%-20s %8.2f MiB\n", f, $5 / 1048576}'
done
