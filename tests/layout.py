"""The source layout's rules, checked by the test command (tests/run.sh).

- No source file in `shared/` or `functions/` (Rust, and the portal's
  JavaScript and CSS) has more than 400 lines before its unit tests (a file's `#[cfg(test)]` module at the end), and
  no function there has more than 60 (its signature to its closing brace;
  tests and the storage contract's checks aside).
- No import circle between the modules of `shared/aws/src`: a module
  that names another (`crate::a::b`, `super::sibling`, `use` or a path in
  the code) depends on it; a module naming an item of its own parent or
  ancestor (`super::AwsStore`) is the ordinary Rust nesting and does not
  count, but everything else does, `pub use` re-exports included: a path
  to a re-exported item (`crate::store::SLOW_LANES_PK`) depends on the
  module that re-exports it as well as on the one that defines it.
- The store's items module (`shared/aws/src/store/items`: keys, attribute
  reads, item mapping) is its bottom: it names no other module of the
  store.

Prints each breach and exits 1 when there is one.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 400
MAX_FN_LINES = 60
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
AWS_SRC = ROOT / "shared" / "aws" / "src"


def code_lines(path):
    """The file's lines before its unit-test module: an inline
    `#[cfg(test)] mod name {` at column 0 (a test module in a file of its
    own, `mod name;`, ends nothing)."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("#[cfg(test)]") and re.match(r"^mod \w+ \{", lines[i + 1]):
            return lines[:i]
    return lines


def sources():
    """The checked source files: `shared/` and `functions/`, tests aside."""
    for top in ("shared", "functions"):
        for path in sorted((ROOT / top).rglob("*.rs")):
            rel = path.relative_to(ROOT)
            if {"target", "tests", "contract"} & set(rel.parts):
                continue
            if path.stem == "tests" or path.stem.endswith("_tests"):
                continue
            yield path, rel


def functions(lines):
    """(name, first line, length) of each function with a body: from its
    `fn` line to the closing brace at its own indentation."""
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j < len(lines) and "{" not in lines[j]:
            i = j + 1
            continue
        k = j
        while k < len(lines) and lines[k].rstrip() != indent + "}" and not (
            k == j and lines[k].rstrip().endswith("}")
        ):
            k += 1
        yield m.group(7), i + 1, k - i + 1
        i = k + 1


def long_files():
    out = []
    for path, rel in sources():
        lines = code_lines(path)
        if len(lines) > MAX_LINES:
            out.append(f"{rel}: {len(lines)} lines before its tests (at most {MAX_LINES})")
        for name, at, n in functions(lines):
            if n > MAX_FN_LINES:
                out.append(f"{rel}:{at}: fn {name} has {n} lines (at most {MAX_FN_LINES})")
    for top in ("shared", "functions"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".js", ".css") and "target" not in path.parts:
                n = len(path.read_text().splitlines())
                if n > MAX_LINES:
                    out.append(f"{path.relative_to(ROOT)}: {n} lines (at most {MAX_LINES})")
    return out


def module_of(path):
    """A file's module path under `shared/aws/src`, as a tuple."""
    rel = path.relative_to(AWS_SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


PATH = re.compile(r"\b(crate|super)((?:::(?:super|\w+))+)")
GROUP = re.compile(r"\b(crate|super)((?:::\w+)*)::\{([^}]*)\}")


def referenced(module, text, modules, aliases):
    """The modules `text` (of `module`) names."""
    found = set()

    def resolve(head, rest):
        base = () if head == "crate" else module[:-1]
        parts = [p for p in rest.split("::") if p]
        while parts and parts[0] == "super":
            base = base[:-1]
            parts.pop(0)
        target = base
        best = base if base in modules else None
        for p in parts:
            if target + (p,) in aliases:
                # An item a module re-exports is named through that
                # module: the path depends on it as well as on the source.
                found.add(target)
                target = aliases[target + (p,)]
                best = target
            elif target + (p,) in modules:
                target = target + (p,)
                best = target
            else:
                break
        return best

    for m in GROUP.finditer(text):
        head, rest, names = m.group(1), m.group(2), m.group(3)
        for name in names.split(","):
            name = name.strip().split(" as ")[0]
            if name:
                found.add(resolve(head, f"{rest}::{name}"))
    for m in PATH.finditer(GROUP.sub("", text)):
        found.add(resolve(m.group(1), m.group(2)))
    # A child module named by its own name (`first_attempt::FirstStarts`).
    children = {t[-1] for t in modules if t[:-1] == module and len(t) == len(module) + 1}
    for child in children:
        body = re.sub(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+\w+;", "", text, flags=re.M)
        if re.search(rf"(?<![:\w]){child}::", body):
            found.add(module + (child,))
    found.discard(None)
    # Naming an item of one's own parent or ancestor is nesting, not a
    # dependency.
    return {t for t in found if t != module and module[: len(t)] != t}


REEXPORT = re.compile(r"^pub(?:\([^)]*\))? use (\w+(?:::\w+)*)(?:::\{([^}]*)\}| as (\w+))?;", re.M)


def reexports(files, modules):
    """Names a module re-exports, each with the module it comes from: a
    path through them depends on that module (`crate::dlq`, `crate::AwsStore`)."""
    out = {}
    for m, path in files.items():
        for found in REEXPORT.finditer(strip_comments(code_text(path))):
            base, names, alias = found.group(1), found.group(2), found.group(3)
            parts = base.split("::")
            if parts[0] == "crate":
                target = tuple(parts[1:])
            elif parts[0] == "super":
                target = m[:-1] + tuple(parts[1:])
            else:
                target = m + tuple(parts)
            if names is not None:
                for name in names.split(","):
                    name = name.strip().split(" as ")[-1].strip()
                    if name and target in modules:
                        out[m + (name,)] = target
            elif target in modules:
                out[m + (alias or parts[-1],)] = target
            elif target[:-1] in modules:
                out[m + (alias or parts[-1],)] = target[:-1]
    return out


def module_graph():
    """Each module of `shared/aws/src` with the modules it names."""
    files = {module_of(p): p for p in AWS_SRC.rglob("*.rs")}
    modules = set(files)
    aliases = reexports(files, modules)
    return {
        m: referenced(m, strip_comments(code_text(p)), modules, aliases)
        for m, p in files.items()
    }


BOTTOM = ("store", "items")


def above_the_bottom(graph):
    """Modules of the store's items module that name the store above it."""
    return [
        f"shared/aws: {'::'.join(m)} names {'::'.join(dep)}, above the store's items"
        for m in sorted(graph)
        if m[: len(BOTTOM)] == BOTTOM
        for dep in sorted(graph[m])
        if dep[:1] == BOTTOM[:1] and dep[: len(BOTTOM)] != BOTTOM
    ]


def circles(graph):
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    name = lambda m: "::".join(m) or "lib"
    return [
        "import circle in shared/aws: " + " <-> ".join(sorted(name(m) for m in comp))
        for comp in out
    ]


def code_text(path):
    return "\n".join(code_lines(path))


def main():
    graph = module_graph()
    breaches = long_files() + circles(graph) + above_the_bottom(graph)
    for b in breaches:
        print(b)
    if breaches:
        sys.exit(1)
    print(
        "layout: no file over 400 lines, no function over 60, no import circle in shared/aws,"
        " the store's items at its bottom"
    )


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
