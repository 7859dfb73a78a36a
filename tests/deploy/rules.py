"""The rules AWS enforces when a stack is created, checked on
infra/template.yaml itself (the test command runs this before anything
deploys). cfn-lint and `sam validate` check the template's shape; these
are the rules they do not check and the local stand-in does not enforce
(infra/README.md, "What the local deploy cannot check"):

- redrive: a dead-letter queue whose `RedriveAllowPolicy` is `byQueue`
  takes only the queues it lists (SQS refuses to create a queue whose
  `RedrivePolicy` names it otherwise), `denyAll` takes none, and a FIFO
  queue's dead-letter queue is FIFO too;
- reservations: no function reserves concurrency at the defaults (Lambda
  keeps 100 of an account's concurrency unreserved and a new account's
  quota can be 10, so a default reservation can fail the first deploy);
- alarms: every function has an `Errors` and a `Throttles` alarm that
  notifies someone;
- visibility: every queue a function consumes has a visibility timeout of
  at least six times the function's timeout (Lambda refuses an event
  source mapping below one times it; six is its documented advice);
- batch size: an SQS FIFO event source takes at most 10 messages a batch;
- and what moto's CloudFormation creates without keeping (so the deploy
  check cannot read it back; tests/deploy/state.py's SKIPPED lists it):
  the table's TTL on the attribute the code reads and its point-in-time
  recovery, each function's log group and its role's right to write it,
  and autoscaling of the table and every index in PROVISIONED mode.

Prints each breach and exits 1 when there is one; `--template PATH`
checks another file (tests/deploy/rules_test.py breaks each rule on a copy).
"""

import sys

import template as tpl

LAMBDA_ALARMS = ("Errors", "Throttles")


def queues(t):
    return dict(tpl.resources(t, "AWS::SQS::Queue"))


def redrive_breaches(t, r):
    """Each queue redriving into a dead-letter queue that does not take it."""
    out = []
    qs = queues(t)
    for source, props in qs.items():
        policy = props.get("RedrivePolicy")
        if not policy:
            continue
        target = tpl.get_att_target(policy.get("deadLetterTargetArn"), "Arn")
        if target not in qs:
            out.append(f"{source}: RedrivePolicy names no queue of the template by its Arn")
            continue
        dlq = qs[target]
        if props.get("FifoQueue") and not dlq.get("FifoQueue"):
            out.append(f"{source} is FIFO and its dead-letter queue {target} is not")
        allow = dlq.get("RedriveAllowPolicy")
        if not allow:
            continue
        permission = allow.get("redrivePermission")
        if permission == "denyAll":
            out.append(f"{target}'s RedriveAllowPolicy is denyAll, yet {source} redrives into it")
        elif permission == "byQueue":
            name = tpl.sub_text(props.get("QueueName"))
            listed = allow.get("sourceQueueArns") or []
            if any(tpl.get_att_target(a, "Arn") == source for a in listed):
                out.append(
                    f"{target}'s RedriveAllowPolicy names {source} by !GetAtt, while {source} "
                    f"names {target} by !GetAtt: a dependency cycle; construct the ARN with !Sub"
                )
                continue
            arn = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"
            named = name is not None and any(tpl.sub_text(a) == arn + name for a in listed)
            if not named:
                out.append(
                    f"{target}'s RedriveAllowPolicy (byQueue) does not list {source}, "
                    f"which names it as its dead-letter queue: SQS refuses to create {source}"
                )
    return out


def reservation_breaches(t, r):
    """Each function that reserves concurrency at the defaults."""
    out = []
    for name, props in tpl.functions(t):
        reserved = r.value(props.get("ReservedConcurrentExecutions", {"Ref": "AWS::NoValue"}))
        if reserved is tpl.NO_VALUE:
            continue
        if str(reserved) == "0":
            out.append(f"{name} reserves 0 concurrent executions by default: it never runs")
        else:
            out.append(
                f"{name} reserves {reserved} concurrent executions by default: "
                "a new account's quota can be 10 with 100 kept unreserved"
            )
    return out


def alarm_breaches(t, r):
    """Each function without an Errors or a Throttles alarm with actions."""
    watched = set()
    for _, props in tpl.resources(t, "AWS::CloudWatch::Alarm"):
        if props.get("Namespace") != "AWS/Lambda" or not props.get("AlarmActions"):
            continue
        for d in props.get("Dimensions", []):
            value = d.get("Value")
            if d.get("Name") == "FunctionName" and isinstance(value, dict) and "Ref" in value:
                watched.add((value["Ref"], props.get("MetricName")))
    return [
        f"{name} has no {metric} alarm (AWS/Lambda, FunctionName, with AlarmActions)"
        for name, _ in tpl.functions(t)
        for metric in LAMBDA_ALARMS
        if (name, metric) not in watched
    ]


def consumer_breaches(t, r):
    """Each SQS event source whose queue's visibility is under six times
    its function's timeout, or whose FIFO batch is over 10."""
    out = []
    qs = queues(t)
    for name, props in tpl.functions(t):
        timeout = int(r.value(props.get("Timeout", 3)))
        for event, e in props.get("Events", {}).items():
            if e.get("Type") != "SQS":
                continue
            queue = tpl.get_att_target(e["Properties"].get("Queue"), "Arn")
            if queue not in qs:
                out.append(f"{name}.{event}: its Queue is not a queue of the template")
                continue
            visibility = int(r.value(qs[queue].get("VisibilityTimeout", 30)))
            if visibility < 6 * timeout:
                out.append(
                    f"{queue}'s VisibilityTimeout {visibility} s is under 6 x {name}'s "
                    f"Timeout {timeout} s"
                )
            batch = int(r.value(e["Properties"].get("BatchSize", 10)))
            if qs[queue].get("FifoQueue") and batch > 10:
                out.append(f"{name}.{event}: a FIFO event source takes at most 10, not {batch}")
    return out


#: The attribute the code reads an item's expiry from
#: (`shared/aws/src/store/items`), which the table's TTL must name.
TTL_ATTRIBUTE = "expires_at"


def table_breaches(t, r):
    """The table's settings moto's CloudFormation does not keep: TTL on
    the attribute the code writes, and point-in-time recovery."""
    out = []
    for name, props in tpl.resources(t, "AWS::DynamoDB::Table"):
        ttl = props.get("TimeToLiveSpecification") or {}
        if not (ttl.get("Enabled") is True and ttl.get("AttributeName") == TTL_ATTRIBUTE):
            out.append(f"{name}: TTL is not enabled on {TTL_ATTRIBUTE}")
        pitr = props.get("PointInTimeRecoverySpecification") or {}
        if pitr.get("PointInTimeRecoveryEnabled") is not True:
            out.append(f"{name}: point-in-time recovery is off")
    return out


def logging_breaches(t, r):
    """Each function logs to a log group of the template that its role may
    write (moto keeps neither the function's LoggingConfig nor checks the
    role)."""
    out = []
    groups = dict(tpl.resources(t, "AWS::Logs::LogGroup"))
    roles = dict(tpl.resources(t, "AWS::IAM::Role"))
    for name, props in tpl.functions(t):
        group = (props.get("LoggingConfig") or {}).get("LogGroup", {})
        group = group.get("Ref") if isinstance(group, dict) else None
        if group not in groups:
            out.append(f"{name}: its LoggingConfig names no log group of the template")
            continue
        role = roles.get(tpl.get_att_target(props.get("Role"), "Arn"), {})
        writable = [
            tpl.get_att_target(res, "Arn")
            for policy in role.get("Policies", [])
            for s in policy["PolicyDocument"]["Statement"]
            if isinstance(s, dict) and "logs:PutLogEvents" in s.get("Action", [])
            for res in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        ]
        if group not in writable:
            out.append(f"{name}: its role may not write its log group {group}")
    return out


def autoscaling_breaches(t, r):
    """With PROVISIONED capacity, the table and each index scale both
    their read and write units (moto creates no scalable target)."""
    table, props = next(iter(tpl.resources(t, "AWS::DynamoDB::Table")))
    want = {f"table/{table}"} | {
        f"table/{table}/index/{g['IndexName']}" for g in props.get("GlobalSecondaryIndexes", [])
    }
    scaled = set()
    targets = dict(tpl.resources(t, "AWS::ApplicationAutoScaling::ScalableTarget"))
    policies = {
        (p.get("ScalingTargetId") or {}).get("Ref")
        for _, p in tpl.resources(t, "AWS::ApplicationAutoScaling::ScalingPolicy")
    }
    for name, p in targets.items():
        resource = tpl.sub_text(p.get("ResourceId")) or ""
        resource = resource.replace("${" + table + "}", table)
        if name in policies:
            scaled.add((resource, p.get("ScalableDimension", "").rsplit(":", 1)[-1]))
    return [
        f"{resource}: no autoscaled {units}"
        for resource in sorted(want)
        for units in ("ReadCapacityUnits", "WriteCapacityUnits")
        if (resource, units) not in scaled
    ]


RULES = (
    redrive_breaches,
    reservation_breaches,
    alarm_breaches,
    consumer_breaches,
    table_breaches,
    logging_breaches,
    autoscaling_breaches,
)


def breaches(t):
    """Every rule's breaches of template `t` at its defaults."""
    r = tpl.Resolver(t)
    return [b for rule in RULES for b in rule(t, r)]


def main(argv):
    path = argv[argv.index("--template") + 1] if "--template" in argv else tpl.TEMPLATE
    found = breaches(tpl.load(path))
    for b in found:
        print(f"template rule: {b}", file=sys.stderr)
    if found:
        return 1
    print(f"{len(RULES)} deploy-time rules hold on {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
