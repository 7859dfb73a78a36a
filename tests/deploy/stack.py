"""Deploys infra/template.yaml to the local stand-in (moto's CloudFormation)
the way `sam deploy` would, and checks what it created: the services'
state, not the stack's status (moto reports some resources created that
it skips; infra/README.md, "What the local deploy cannot check").

    stack.py package --endpoint URL
        `sam package` of infra/.aws-sam/build (what `sam build` made): the
        functions' code uploaded to the stand-in's S3, the packaged
        template written to target/deploy/packaged.yaml.
    stack.py check --endpoint URL
        for the defaults and each non-default mode (MODES), translates the
        packaged template with aws-sam-translator (the SAM transform moto
        lacks), creates the stack and checks its queues, table, functions,
        environments and event source mappings; exits 1 on a breach.
    stack.py create --endpoint URL --name NAME [--param KEY=VALUE ...]
        creates one stack and prints, as JSON, each function's environment
        as deployed and the stack's outputs (the Rust tests run on it).
"""

import argparse
import logging
import json
import os
import pathlib
import subprocess
import sys
import time

import boto3
import botocore.exceptions

import environment
import state
import template as tpl
from samtranslator.translator.transform import transform

# The translator warns of metrics it keeps for AWS's own use.
logging.getLogger("samtranslator").setLevel(logging.ERROR)

OUT = tpl.ROOT / "target" / "deploy"
PACKAGED = OUT / "packaged.yaml"
BUCKET = "hooklane-deploy-artifacts"
REGION = "us-east-1"

#: The template's defaults, then each mode a user can choose.
MODES = {
    "defaults": {},
    "jwt": {
        "AuthMode": "JWT",
        "JwtIssuer": "https://issuer.example.com/",
        "JwtAudience": "hooklane-api,other",
    },
    "provisioned": {"TableBillingMode": "PROVISIONED", "TableMinWriteUnits": "7"},
    "ingest-queue": {"FanOutInApi": "false"},
    "reserved": {
        "ApiReservedConcurrency": "5",
        "FanoutReservedConcurrency": "10",
        "DeliveryReservedConcurrency": "50",
    },
}


def clients(endpoint):
    kw = dict(
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    names = ("cloudformation", "sqs", "lambda", "dynamodb", "s3", "sns")
    return {name: boto3.client(name, **kw) for name in names}


def package(endpoint):
    """`sam package` of what `sam build` made, into the stand-in's S3."""
    build = tpl.ROOT / "infra" / ".aws-sam" / "build" / "template.yaml"
    if not build.exists():
        sys.exit(f"{build} is missing: run `sam build` in infra/ first")
    OUT.mkdir(parents=True, exist_ok=True)
    s3 = clients(endpoint)["s3"]
    if BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=BUCKET)
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_REGION=REGION,
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               SAM_CLI_TELEMETRY="0")
    sam = pathlib.Path(sys.executable).parent / "sam"
    done = subprocess.run(
        [str(sam), "package", "--template-file", str(build), "--s3-bucket", BUCKET,
         "--output-template-file", str(PACKAGED), "--region", REGION],
        env=env, capture_output=True, text=True,
    )
    if done.returncode != 0:
        sys.exit(f"sam package failed:\n{done.stdout}\n{done.stderr}")
    return PACKAGED


class NoManagedPolicies:
    """The translator asks for AWS's managed policies only for SAM
    `Policies`, which the template does not use (its roles are its own)."""

    def load(self):
        return {}


def translate(params):
    """The packaged template through the SAM transform, for `params`."""
    if not PACKAGED.exists():
        sys.exit(f"{PACKAGED} is missing: run `stack.py package` first")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    return transform(tpl.load(PACKAGED), dict(params), NoManagedPolicies())


def create(c, name, params):
    """Creates stack `name`; returns its description once complete. A
    `CreateStack` the stand-in fails with a 5xx is tried again, twice."""
    body = json.dumps(translate(params))
    for attempt in range(3):
        try:
            c["cloudformation"].create_stack(
                StackName=name,
                TemplateBody=body,
                Capabilities=["CAPABILITY_IAM"],
                Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in params.items()],
            )
            break
        except (botocore.exceptions.ClientError, botocore.exceptions.ResponseParserError) as e:
            status = getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 500)
            exists = "AlreadyExists" in str(e)
            if attempt == 2 or (status < 500 and not exists):
                raise
            if exists:
                break
            print(f"CreateStack {name} failed ({e}); trying again", file=sys.stderr)
            time.sleep(1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stack = c["cloudformation"].describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("IN_PROGRESS"):
            break
        time.sleep(0.2)
    if stack["StackStatus"] != "CREATE_COMPLETE":
        sys.exit(f"stack {name}: {stack['StackStatus']} {stack.get('StackStatusReason', '')}")
    return stack


def physical_ids(c, name):
    """Logical id to physical id of each resource of the stack."""
    pages = c["cloudformation"].get_paginator("list_stack_resources").paginate(StackName=name)
    return {
        r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
        for page in pages
        for r in page["StackResourceSummaries"]
    }


def environments(c, ids):
    """Each function's environment as deployed, by logical id."""
    t = tpl.load()
    out = {}
    for logical, _ in tpl.functions(t):
        conf = c["lambda"].get_function_configuration(FunctionName=ids[logical])
        out[logical] = {k: str(v) for k, v in conf.get("Environment", {}).get("Variables", {}).items()}
    return out


def check(c, run):
    found = []
    read = environment.read_by_code()
    for mode, params in MODES.items():
        name = f"hl-{mode}-{run}"
        found += [
            f"{mode}: resource type {kind} is neither read back nor in state.SKIPPED"
            for kind in state.unchecked_types(translate(params))
        ]
        create(c, name, params)
        ids = physical_ids(c, name)
        envs = environments(c, ids)
        found += [f"{mode}: {b}" for b in state.breaches(c, tpl.load(), params, name, ids, envs)]
        found += [f"{mode}: {b}" for b in environment.breaches(read, {k: set(v) for k, v in envs.items()})]
        print(f"stack {name} ({mode}): {len(ids)} resources checked")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["package", "check", "create"])
    p.add_argument("--endpoint", required=True)
    p.add_argument("--name")
    p.add_argument("--param", action="append", default=[])
    a = p.parse_args()
    c = clients(a.endpoint)
    if a.command == "package":
        print(package(a.endpoint))
    elif a.command == "check":
        found = check(c, str(int(time.time())))
        for b in found:
            print(f"deploy check: {b}", file=sys.stderr)
        return 1 if found else 0
    else:
        params = dict(kv.split("=", 1) for kv in a.param)
        stack = create(c, a.name, params)
        ids = physical_ids(c, a.name)
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        print(json.dumps({"functions": environments(c, ids), "outputs": outputs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
