"""Every relative link in the repository's Markdown leads somewhere.

Checked by the test command (tests/run.sh). For each Markdown file that
git knows (tracked, or new and not ignored; `target/` and `.venv*`
aside), every link and image whose target is not a URL with a scheme
(`http:`, `https:`, `mailto:`, ...) must name:

- a file or directory of the repository (a target starting with `/` is
  taken from the repository's root, as GitHub takes it; any other from
  the linking file's directory), never one outside it, and never one
  git ignores (a build's output in `target/` is no reader's);
- when it has a `#anchor` and names a Markdown file (or only the anchor:
  the same file), a heading of that file, by GitHub's rule: the
  heading's text in lower case, without punctuation other than `-` and
  `_`, each space a `-`; a heading met again gets `-1`, `-2`, ... An
  explicit `<a id="...">` or `<a name="...">` counts too. (With a query,
  `?plain=1#L3`, the anchor is a line of the source and is not checked.)

A link whose target contains `../shared` fails whatever it resolves to.

Links are inline (`[text](target)`, `![alt](target)`), reference
definitions (`[name]: target`) and HTML `href="..."` / `src="..."`.
Fenced code blocks and inline code are not read.

Prints `file:line: target: why` for each bad link and exits 1 when there
is one.
"""

import pathlib
import re
import subprocess
import sys
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
EXPLICIT = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
# `[text](target "title")` or `![alt](<target>)`; the text may hold one
# level of brackets (an image inside a link) and run over lines.
INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
    r"\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
# `[name]: target`, not a footnote (`[^1]: text`).
REFERENCE = re.compile(r"^ {0,3}\[(?!\^)[^\]]+\]:\s*(<[^>\n]*>|\S+)", re.M)
HTML = re.compile(r"""<(?:a|img)\s[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)


def blank(text):
    """The text with every character but a newline made a space."""
    return re.sub(r"[^\n]", " ", text)


def code_lines(lines):
    """Whether each line is inside a fenced code block (fences included)."""
    out = []
    fence = None
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append(True)
        elif fence is not None:
            closing = m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
            if closing and line.strip() == m.group(1):
                fence = None
            out.append(True)
        else:
            out.append(False)
    return out


def prose(text):
    """The file's text with fenced code blocks and inline code blanked
    out (line numbers and offsets kept)."""
    lines = text.split("\n")
    code = code_lines(lines)
    kept = [blank(line) if c else line for line, c in zip(lines, code)]
    return CODE_SPAN.sub(lambda m: blank(m.group(0)), "\n".join(kept))


def heading_text(raw):
    """A heading's text as rendered: links and images by their text,
    inline code by its content, HTML tags left out."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "")


def slug(text):
    """GitHub's anchor for a heading's text (before duplicates)."""
    text = heading_text(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown file's headings and `<a id>` tags give."""
    found = set()
    seen = {}
    lines = text.split("\n")
    code = code_lines(lines)
    for i, line in enumerate(lines):
        if code[i]:
            continue
        heading = None
        m = ATX.match(line)
        if m:
            heading = m.group(2)
        elif (
            i > 0
            and not code[i - 1]
            and SETEXT.match(line)
            and lines[i - 1].strip()
            and not ATX.match(lines[i - 1])
            and not lines[i - 1].lstrip().startswith(("|", "- ", "* ", "> "))
        ):
            heading = lines[i - 1].strip()
        if heading is not None:
            base = slug(heading)
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    found.update(EXPLICIT.findall(prose(text)))
    return found


def links(text):
    """Each link target of a Markdown file, with its line number."""
    body = prose(text)
    out = []
    for pattern in (INLINE, REFERENCE, HTML):
        for m in pattern.finditer(body):
            target = m.group(1)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            out.append((body.count("\n", 0, m.start()) + 1, target))
    return sorted(out)


def within(root, path):
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check(root, files, known=None):
    """The bad links of `files` (paths relative to `root`), as
    `(file, line, target, why)`. `known`, when given, is the set of
    repository files (relative paths with `/`) a target must be one of,
    or a directory of; otherwise a target must exist on disk."""
    root = pathlib.Path(root).resolve()
    cache = {}
    dirs = None
    if known is not None:
        dirs = {str(pathlib.PurePosixPath(f).parent) for f in known}
        dirs |= {str(p) for f in known for p in pathlib.PurePosixPath(f).parents}
    bad = []
    for name in files:
        source = root / name
        text = source.read_text(encoding="utf-8")
        for line, target in links(text):
            if "../shared" in target:
                bad.append((name, line, target, "names ../shared"))
                continue
            if SCHEME.match(target) or target.startswith("//"):
                continue
            path_part, _, anchor = target.partition("#")
            path_part, has_query, _ = path_part.partition("?")
            path_part = urllib.parse.unquote(path_part)
            if path_part == "":
                dest = source
            elif path_part.startswith("/"):
                dest = root / path_part.lstrip("/")
            else:
                dest = source.parent / path_part
            dest = pathlib.Path(_normal(dest))
            if not within(root, dest):
                bad.append((name, line, target, "leads outside the repository"))
                continue
            rel = dest.relative_to(root).as_posix()
            if known is not None:
                exists = rel in known or rel in dirs or rel == "."
            else:
                exists = dest.exists()
            if not exists:
                bad.append((name, line, target, "no such file"))
                continue
            # With a query (`?plain=1#L3`) the anchor is not a heading's.
            if anchor and not has_query and dest.suffix.lower() == ".md" and dest.is_file():
                if dest not in cache:
                    cache[dest] = anchors(dest.read_text(encoding="utf-8"))
                if urllib.parse.unquote(anchor).lower() not in cache[dest]:
                    bad.append((name, line, target, f"no heading #{anchor} in {rel}"))
    return bad


def _normal(path):
    """The path with `.` and `..` folded, without following links."""
    parts = []
    for part in pathlib.PurePosixPath(path.as_posix()).parts:
        if part == "..":
            if parts and parts[-1] != "/":
                parts.pop()
        elif part != ".":
            parts.append(part)
    return pathlib.PurePosixPath(*parts) if parts else pathlib.PurePosixPath(".")


def skipped(name):
    first = name.split("/", 1)[0]
    return first == "target" or first.startswith(".venv")


def repository_files(root):
    """Every file git knows under `root`: tracked, or new and not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, check=True, capture_output=True,
    ).stdout.decode()
    return {f for f in out.split("\0") if f and (root / f).exists()}


def main():
    try:
        known = repository_files(ROOT)
        files = sorted(f for f in known if f.endswith(".md") and not skipped(f))
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout: every Markdown file on disk, checked against
        # the disk.
        known = None
        files = sorted(
            p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.md")
            if not skipped(p.relative_to(ROOT).as_posix())
        )
    bad = check(ROOT, files, known)
    for name, line, target, why in bad:
        print(f"{name}:{line}: ({target}): {why}")
    print(f"links: {len(files)} Markdown files, {len(bad)} bad link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
