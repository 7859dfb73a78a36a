# Shell helpers of the test command (tests/run.sh) and the OpenAPI fuzzer
# (tests/fuzz/run.sh), sourced by both: a free loopback port, a URL's
# check, and the wait for a server they started.

# A TCP port on 127.0.0.1 that nothing listens on yet.
free_port() {
  .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Whether URL answers 2xx within a second.
url_up() {
  .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
    "$1" > /dev/null 2>&1
}

# wait_up WHAT LOGS CHECK...: runs CHECK until it succeeds (at most 20 s);
# when it never does, prints WHAT did not start with LOGS (a space-separated
# list of files) and exits 1.
wait_up() {
  local what=$1 logs=$2
  shift 2
  for _ in $(seq 1 100); do
    if "$@"; then return 0; fi
    sleep 0.2
  done
  echo "$what did not start; its log:" >&2
  # shellcheck disable=SC2086
  cat $logs >&2
  exit 1
}
