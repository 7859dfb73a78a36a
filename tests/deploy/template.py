"""Reading infra/template.yaml the way CloudFormation does, for the deploy
checks (tests/deploy/rules.py, tests/deploy/stack.py).

The template is parsed by `aws-sam-translator`'s own YAML reader (the
short forms `!Ref`, `!GetAtt`, `!Sub` become their long forms), and a
parameter set (the defaults, with overrides) resolves the handful of
intrinsic functions the rules need: `Ref` of a parameter, `Fn::If` on a
condition, and the conditions themselves (`Fn::Equals`, `Fn::Not`,
`Fn::And`, `Fn::Or`).
"""

import pathlib

from samtranslator.yaml_helper import yaml_parse

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TEMPLATE = ROOT / "infra" / "template.yaml"

#: What `Fn::If` gives for `AWS::NoValue`: the property is left out.
NO_VALUE = object()


def load(path=TEMPLATE):
    """The template as a dict of long-form intrinsics."""
    return yaml_parse(pathlib.Path(path).read_text())


def text(value):
    """A parameter's value as CloudFormation hands it on: a string
    (`true`, not Python's `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class Resolver:
    """Resolves a template's values under one set of parameters."""

    def __init__(self, template, overrides=None):
        self.template = template
        self.params = {
            name: text(p.get("Default", ""))
            for name, p in template.get("Parameters", {}).items()
        }
        self.params.update({k: text(v) for k, v in (overrides or {}).items()})

    def condition(self, name):
        """Whether condition `name` holds."""
        return self.truth(self.template["Conditions"][name])

    def truth(self, node):
        """A condition expression's value."""
        if isinstance(node, dict) and len(node) == 1:
            (fn, args), = node.items()
            if fn == "Fn::Equals":
                a, b = (self.value(x) for x in args)
                return str(a) == str(b)
            if fn == "Fn::Not":
                return not self.truth(args[0])
            if fn == "Fn::And":
                return all(self.truth(a) for a in args)
            if fn == "Fn::Or":
                return any(self.truth(a) for a in args)
            if fn == "Condition":
                return self.condition(args)
        raise ValueError(f"not a condition: {node!r}")

    def value(self, node):
        """A property's value: `Ref` of a parameter and `Fn::If` resolved,
        anything else as written (NO_VALUE for `AWS::NoValue`)."""
        if isinstance(node, dict) and len(node) == 1:
            (fn, args), = node.items()
            if fn == "Ref" and args == "AWS::NoValue":
                return NO_VALUE
            if fn == "Ref" and args in self.params:
                return self.params[args]
            if fn == "Fn::If":
                cond, yes, no = args
                return self.value(yes if self.condition(cond) else no)
        return node


def resources(template, kind):
    """(logical id, properties) of every resource of type `kind`."""
    for name, r in template.get("Resources", {}).items():
        if r.get("Type") == kind:
            yield name, r.get("Properties", {})


def functions(template):
    """(logical id, properties) of every function, the SAM globals
    beneath its own properties."""
    glob = template.get("Globals", {}).get("Function", {})
    for name, props in resources(template, "AWS::Serverless::Function"):
        merged = dict(glob)
        merged.update(props)
        env = dict(glob.get("Environment", {}).get("Variables", {}))
        env.update(props.get("Environment", {}).get("Variables", {}))
        merged["Environment"] = {"Variables": env}
        yield name, merged


def get_att_target(node, attribute):
    """The logical id `node` takes `attribute` of (`!GetAtt X.attribute`),
    or None."""
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        target = node["Fn::GetAtt"]
        if isinstance(target, str):
            target = target.split(".", 1)
        if len(target) == 2 and target[1] == attribute:
            return target[0]
    return None


def sub_text(node):
    """The text of a `!Sub` string (or a plain string), else None."""
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and "Fn::Sub" in node:
        sub = node["Fn::Sub"]
        return sub if isinstance(sub, str) else sub[0]
    return None
