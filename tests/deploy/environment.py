"""Which `HOOKLANE_*` variables the Lambda functions' code reads, and which
of them the template leaves unset on purpose (each with its reason).

The variables read are the string literals `"HOOKLANE_..."` in the sources
the three Lambda binaries link: the core library (`shared/src`), the AWS
adapters (`shared/aws/src`) and the function crates, tests aside. A
variable read there that no function's environment sets, and that is not
in `NOT_SET` below, fails the deploy check: a setting the code has and the
stack cannot give (or a name the template spells otherwise).
"""

import re

from template import ROOT

SOURCES = [
    ROOT / "shared" / "src",
    ROOT / "shared" / "aws" / "src",
    ROOT / "functions" / "api" / "src",
    ROOT / "functions" / "fanout" / "src",
    ROOT / "functions" / "delivery" / "src",
]

VARIABLE = re.compile(r'"(HOOKLANE_[A-Z0-9_]+)"')

#: Read by the shared code, deliberately not set on the Lambda functions.
NOT_SET = {
    # `hooklane serve` only: its own bearer token, HTTP server timings and
    # the stand-in of the event source mappings that `serve --backend aws`
    # runs (on AWS, API Gateway authenticates and Lambda polls).
    "HOOKLANE_API_TOKEN": "serve's bearer token; API Gateway authenticates on AWS",
    "HOOKLANE_SHUTDOWN_GRACE": "serve's HTTP server",
    "HOOKLANE_HEADER_TIMEOUT": "serve's HTTP server",
    "HOOKLANE_BODY_TIMEOUT": "serve's HTTP server",
    "HOOKLANE_LOCAL_POLL": "serve --backend aws's event source stand-in",
    "HOOKLANE_LOCAL_MAX_INVOCATIONS": "serve --backend aws's event source stand-in",
    "HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS": "serve --backend aws's event source stand-in",
    # Measurement: counts every AWS call for the benchmark.
    "HOOKLANE_COUNT_AWS_CALLS": "the benchmark's call counting",
    # Development only: a deployed stack sends to public https endpoints.
    "HOOKLANE_ALLOW_HTTP": "development only",
    "HOOKLANE_ALLOW_PRIVATE_TARGETS": "development only",
    # Lifts the refusal of cloud metadata addresses: never wanted on AWS.
    "HOOKLANE_ALLOW_METADATA_TARGETS": "the metadata refusal stays on AWS",
    # The commit a build is made from: set by the build script at compile
    # time (shared/build.rs), not read from the environment at run time.
    "HOOKLANE_COMMIT": "set at build time by shared/build.rs",
    # The portal's signing key is generated once and kept in the table; the
    # portal's links take the request's host (API Gateway's, or a custom
    # domain's) where no public URL is set.
    "HOOKLANE_PORTAL_KEY": "generated and kept in the table",
    "HOOKLANE_PUBLIC_URL": "the request's own host is used",
    # On AWS operators are told through the operator topic (OperatorEvents);
    # an operator webhook would put its secret in the functions' environment.
    "HOOKLANE_OPERATOR_WEBHOOK_URL": "the operator topic tells operators on AWS",
    "HOOKLANE_OPERATOR_WEBHOOK_SECRET": "the operator topic tells operators on AWS",
    # Health tuning with the defaults of the README (set on the functions
    # by hand where an operator needs other values).
    "HOOKLANE_SUSPEND_POLICY": "the README's defaults",
    "HOOKLANE_BREAKER": "the README's defaults",
    "HOOKLANE_RECOVERY_RAMP": "the README's defaults",
    "HOOKLANE_BACKFILL_RATE": "the README's defaults",
    "HOOKLANE_RECOVERED_AFTER": "the README's defaults",
}

#: Set on the functions though no `HOOKLANE_` literal reads it.
OTHER_SET = {"RUST_LOG"}

#: Read by every function, set on some only: unset means the default.
SET_WHERE_NEEDED = {
    "HOOKLANE_POOL": "main unless set; the slow pool's function sets slow",
}


def read_by_code():
    """Every `HOOKLANE_*` variable named in the functions' sources."""
    found = set()
    for top in SOURCES:
        for path in top.rglob("*.rs"):
            if path.stem == "tests" or path.stem.endswith("_tests") or "contract" in path.parts:
                continue
            found.update(VARIABLE.findall(path.read_text()))
    return found


def breaches(read, environments):
    """What is wrong between the variables the code reads (`read`) and the
    functions' environments (`environments`: function name to its
    variables)."""
    out = []
    given = set().union(*environments.values()) if environments else set()
    for var in sorted(read - given - set(NOT_SET)):
        out.append(f"{var} is read by the code and set on no function")
    # Every function links the same configuration code, so each reads
    # every variable: one set on some functions only is missing on the
    # others (but where unset means what that function needs).
    for function, env in sorted(environments.items()):
        for var in sorted((read & given) - env - set(NOT_SET) - set(SET_WHERE_NEEDED)):
            out.append(f"{var} is set on some functions but not on {function}")
    for var in sorted(given - read - OTHER_SET):
        out.append(f"{var} is set on a function and read by no code")
    for var in sorted(set(NOT_SET) & given):
        out.append(f"{var} is set on a function though NOT_SET says: {NOT_SET[var]}")
    for var in sorted((set(NOT_SET) | set(SET_WHERE_NEEDED)) - read):
        out.append(f"{var} is listed here but the code no longer reads it")
    return out
