"""What a stack created from infra/template.yaml must hold, read from the
services themselves (SQS, DynamoDB, Lambda on the local stand-in), against
the template resolved with the stack's parameters and against the
design's fixed rules (DESIGN §3 as the README states them: FIFO queues in
high-throughput mode, the maximum message size set, 14 days' retention,
visibility at least six function timeouts, redrive to FIFO dead-letter
queues; the table's keys and indexes).

Used by tests/deploy/stack.py; `breaches` returns what is wrong.
"""

import template as tpl

#: Every queue's attributes, whatever the template says (DESIGN §3).
QUEUE_RULES = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
    "MaximumMessageSize": "262144",
    "MessageRetentionPeriod": "1209600",
    "SqsManagedSseEnabled": "true",
}

#: The resource types whose state the check reads back from the services.
READ_BACK = {
    "AWS::SQS::Queue",
    "AWS::DynamoDB::Table",
    "AWS::Lambda::Function",
    "AWS::Lambda::EventSourceMapping",
    "AWS::IAM::Role",  # each function's role, by ARN
    "AWS::SNS::Topic",  # the operator topic the functions name
}

#: What moto's CloudFormation reports created but does not make, or makes
#: without keeping what the template says, and how each is checked
#: instead (infra/README.md says the same). A resource type of the
#: translated template in neither list fails the check.
SKIPPED = {
    "AWS::ApiGatewayV2::Api": "sam validate --lint and cfn-lint; the routes by the tests of serve",
    "AWS::ApiGatewayV2::Stage": "sam validate --lint and cfn-lint",
    "AWS::Lambda::Permission": "sam validate --lint and cfn-lint",
    "AWS::CloudWatch::Alarm": "tests/deploy/rules.py: an Errors and a Throttles alarm per function",
    "AWS::CloudWatch::Dashboard": "cfn-lint",
    "AWS::ApplicationAutoScaling::ScalableTarget": "tests/deploy/rules.py: the table and each index",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "tests/deploy/rules.py: the table and each index",
    "AWS::Logs::LogGroup": "tests/deploy/rules.py: each function's, writable by its role",

    "AWS::SNS::Subscription": "cfn-lint",
    # Properties kept by no service of moto's:
    "RedriveAllowPolicy": "tests/deploy/rules.py: each dead-letter queue lists its sources",
    "TimeToLiveSpecification, PointInTimeRecoverySpecification": "tests/deploy/rules.py",
    "Architectures, LoggingConfig, TracingConfig": "sam build (the architecture) and tests/deploy/rules.py",
    "Rules": "cfn-lint",
}


def unchecked_types(translated):
    """The translated template's resource types neither read back nor
    listed as skipped."""
    kinds = {r["Type"] for r in translated.get("Resources", {}).values()}
    return sorted(kinds - READ_BACK - set(SKIPPED))


TABLE_KEYS = {"pk": "HASH", "sk": "RANGE"}
INDEXES = {"gsi1": {"gsi1pk": "HASH", "gsi1sk": "RANGE"}, "gsi2": {"gsi2pk": "HASH", "gsi2sk": "RANGE"}}


class Stack:
    """One created stack: its template resolved with its parameters, and
    its resources' physical ids."""

    def __init__(self, c, t, params, name, ids):
        self.c, self.t, self.name, self.ids = c, t, name, ids
        self.r = tpl.Resolver(t, params)
        self.queues = dict(tpl.resources(t, "AWS::SQS::Queue"))
        self.attrs = {
            q: c["sqs"].get_queue_attributes(QueueUrl=ids[q], AttributeNames=["All"])["Attributes"]
            for q in self.queues
        }

    def expected(self, node):
        """What a template value is in this stack: parameters, resource
        references (a queue's URL, the table's name, the topic's ARN) and
        the stack name substituted."""
        v = self.r.value(node)
        if isinstance(v, dict) and "Ref" in v:
            return self.ids.get(v["Ref"])
        text = tpl.sub_text(v)
        if isinstance(v, dict) and text is not None:
            return text.replace("${AWS::StackName}", self.name)
        return v


def queue_breaches(s):
    out = []
    for q, props in s.queues.items():
        a = s.attrs[q]
        for key, want in QUEUE_RULES.items():
            if a.get(key) != want:
                out.append(f"{q}: {key} is {a.get(key)!r}, not {want}")
        name = s.expected(props["QueueName"])
        if not a.get("QueueArn", "").endswith(":" + name):
            out.append(f"{q}: named {a.get('QueueArn')}, not {name}")
        visibility = str(s.r.value(props.get("VisibilityTimeout", 30)))
        if a.get("VisibilityTimeout") != visibility:
            out.append(f"{q}: VisibilityTimeout {a.get('VisibilityTimeout')}, not {visibility}")
        out += redrive_breaches(s, q, props, a)
    return out


def redrive_breaches(s, q, props, a):
    policy = props.get("RedrivePolicy")
    if not policy:
        return [f"{q}: a redrive policy the template does not give"] if a.get("RedrivePolicy") else []
    if not a.get("RedrivePolicy"):
        return [f"{q}: no redrive policy"]
    import json

    got = json.loads(a["RedrivePolicy"])
    target = tpl.get_att_target(policy["deadLetterTargetArn"], "Arn")
    want_arn = s.attrs[target]["QueueArn"]
    out = []
    if got.get("deadLetterTargetArn") != want_arn:
        out.append(f"{q}: redrives to {got.get('deadLetterTargetArn')}, not {want_arn}")
    if int(got.get("maxReceiveCount", 0)) != int(policy["maxReceiveCount"]):
        out.append(f"{q}: maxReceiveCount {got.get('maxReceiveCount')}, not {policy['maxReceiveCount']}")
    return out


def table_breaches(s):
    out = []
    (logical, props), = tpl.resources(s.t, "AWS::DynamoDB::Table")
    d = s.c["dynamodb"].describe_table(TableName=s.ids[logical])["Table"]
    keys = {k["AttributeName"]: k["KeyType"] for k in d["KeySchema"]}
    if keys != TABLE_KEYS:
        out.append(f"{logical}: keys {keys}")
    indexes = {
        g["IndexName"]: ({k["AttributeName"]: k["KeyType"] for k in g["KeySchema"]}, g["Projection"]["ProjectionType"])
        for g in d.get("GlobalSecondaryIndexes", [])
    }
    if indexes != {n: (k, "ALL") for n, k in INDEXES.items()}:
        out.append(f"{logical}: indexes {indexes}")
    billing = s.r.value(props["BillingMode"])
    got = d.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
    if got != billing:
        out.append(f"{logical}: billing {got}, not {billing}")
    if billing == "PROVISIONED":
        want = (int(s.r.params["TableMinReadUnits"]), int(s.r.params["TableMinWriteUnits"]))
        for what, tp in [(logical, d["ProvisionedThroughput"])] + [
            (g["IndexName"], g["ProvisionedThroughput"]) for g in d["GlobalSecondaryIndexes"]
        ]:
            if (tp["ReadCapacityUnits"], tp["WriteCapacityUnits"]) != want:
                out.append(f"{what}: capacity {tp}, not {want}")
    protected = str(d.get("DeletionProtectionEnabled")).lower()
    if protected != s.r.params["TableDeletionProtection"]:
        out.append(f"{logical}: deletion protection {protected}")
    return out


def function_breaches(s, envs):
    out = []
    lam = s.c["lambda"]
    for logical, props in tpl.functions(s.t):
        conf = lam.get_function_configuration(FunctionName=s.ids[logical])
        want = {
            "Runtime": props["Runtime"],
            "Handler": props["Handler"],
            "MemorySize": int(s.r.value(props["MemorySize"])),
            "Timeout": int(props["Timeout"]),
        }
        for key, value in want.items():
            if conf.get(key) != value:
                out.append(f"{logical}: {key} {conf.get(key)!r}, not {value!r}")
        role = tpl.get_att_target(props["Role"], "Arn")
        if not conf.get("Role", "").endswith("/" + s.ids[role]):
            out.append(f"{logical}: role {conf.get('Role')}, not {role}")
        reserved = s.r.value(props.get("ReservedConcurrentExecutions", {"Ref": "AWS::NoValue"}))
        got = lam.get_function_concurrency(FunctionName=s.ids[logical]).get("ReservedConcurrentExecutions")
        if got != (None if reserved is tpl.NO_VALUE else int(reserved)):
            out.append(f"{logical}: reserved concurrency {got}, not {reserved}")
        for var, node in props["Environment"]["Variables"].items():
            value = s.expected(node)
            if envs[logical].get(var) != str(value):
                out.append(f"{logical}: {var}={envs[logical].get(var)!r}, not {value!r}")
        out += mapping_breaches(s, logical, props)
    return out


def mapping_breaches(s, logical, props):
    """The function's SQS event source mappings against its `Events`."""
    out = []
    mappings = s.c["lambda"].list_event_source_mappings(FunctionName=s.ids[logical])["EventSourceMappings"]
    by_queue = {m["EventSourceArn"]: m for m in mappings}
    for event, e in props.get("Events", {}).items():
        if e["Type"] != "SQS":
            continue
        p = e["Properties"]
        queue = tpl.get_att_target(p["Queue"], "Arn")
        m = by_queue.get(s.attrs[queue]["QueueArn"])
        if m is None:
            out.append(f"{logical}.{event}: no event source mapping from {queue}")
            continue
        visibility = int(s.attrs[queue]["VisibilityTimeout"])
        if visibility < 6 * int(props["Timeout"]):
            out.append(f"{logical}.{event}: {queue}'s visibility {visibility} s is under 6 function timeouts")
        if m.get("BatchSize") != int(p["BatchSize"]):
            out.append(f"{logical}.{event}: batch size {m.get('BatchSize')}")
        if "ReportBatchItemFailures" not in m.get("FunctionResponseTypes", []):
            out.append(f"{logical}.{event}: no ReportBatchItemFailures")
        most = int(s.r.value(p["ScalingConfig"]["MaximumConcurrency"]))
        if m.get("ScalingConfig", {}).get("MaximumConcurrency") != most:
            out.append(f"{logical}.{event}: maximum concurrency {m.get('ScalingConfig')}, not {most}")
    return out


def topic_breaches(s, envs):
    """The operator topic exists, and is the one every function names."""
    out = []
    for logical, _ in tpl.resources(s.t, "AWS::SNS::Topic"):
        arn = s.ids[logical]
        try:
            s.c["sns"].get_topic_attributes(TopicArn=arn)
        except Exception as e:  # noqa: BLE001 - any failure means no topic
            out.append(f"{logical}: {arn} does not answer GetTopicAttributes ({e})")
        for function, env in envs.items():
            if env.get("HOOKLANE_OPERATOR_TOPIC_ARN") != arn:
                out.append(f"{function}: HOOKLANE_OPERATOR_TOPIC_ARN is not {logical}'s {arn}")
    return out


def breaches(c, t, params, name, ids, envs):
    """Everything stack `name` holds that the template (with `params`) or
    the design's rules say otherwise."""
    s = Stack(c, t, params, name, ids)
    return (
        queue_breaches(s)
        + table_breaches(s)
        + function_breaches(s, envs)
        + topic_breaches(s, envs)
    )
