#!/usr/bin/env bash
# The one test command (README, CI): checks formatting and lints, then runs
# every unit, contract and end-to-end test of the workspace. Everything the
# tests need comes from crates.io through cargo; receivers are started by
# the tests themselves on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --all-targets --locked
