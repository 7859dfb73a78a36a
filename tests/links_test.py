"""tests/links.py finds exactly the bad links of a small tree."""

import pathlib
import tempfile
import unittest

import links

PAGE = """\
# A page

Good: [other](other.md), [a heading](other.md#setup-and-run),
[the second "Notes"](other.md#notes-1), [an explicit anchor](other.md#kept),
[this page](#a-page), [from the root](/docs/img.png), [setext](other.md#setext-heading),
![a picture](img.png), [a directory](../docs/), [a line](other.md?plain=1#L3),
[outside](https://example.com/x.md#nowhere), [mail](mailto:someone@example.com).

Bad: [missing file](missing.md), [missing anchor](other.md#nowhere),
[missing here](#nowhere), [a picture that is not there](gone.png),
[up and out](../../elsewhere.md), [the design](../shared/DESIGN.md),
[a link over
two lines](missing-too.md).

```sh
echo "[in a code block](not-checked.md)"
```

Inline code is not read either: `[x](not-checked-either.md)`.

<a href="missing-html.md">html</a>
"""

OTHER = """\
# Other

## Setup and run

## Notes

Text.

## Notes

<a id="kept"></a>

Setext heading
--------------
"""


class LinksTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = pathlib.Path(self.dir.name)
        (root / "docs").mkdir()
        (root / "docs" / "page.md").write_text(PAGE)
        (root / "docs" / "other.md").write_text(OTHER)
        (root / "docs" / "img.png").write_bytes(b"\x89PNG")
        self.root = root

    def tearDown(self):
        self.dir.cleanup()

    def test_finds_exactly_the_bad_links(self):
        bad = links.check(self.root, ["docs/page.md", "docs/other.md"])
        found = [(name, line, target) for name, line, target, _ in bad]
        self.assertEqual(
            found,
            [
                ("docs/page.md", 9, "missing.md"),
                ("docs/page.md", 9, "other.md#nowhere"),
                ("docs/page.md", 10, "#nowhere"),
                ("docs/page.md", 10, "gone.png"),
                ("docs/page.md", 11, "../../elsewhere.md"),
                ("docs/page.md", 11, "../shared/DESIGN.md"),
                ("docs/page.md", 12, "missing-too.md"),
                ("docs/page.md", 21, "missing-html.md"),
            ],
        )

    def test_the_reasons_say_what_is_wrong(self):
        why = {target: reason for _, _, target, reason in links.check(self.root, ["docs/page.md"])}
        self.assertEqual(why["missing.md"], "no such file")
        self.assertIn("no heading #nowhere", why["other.md#nowhere"])
        self.assertEqual(why["../../elsewhere.md"], "leads outside the repository")
        self.assertEqual(why["../shared/DESIGN.md"], "names ../shared")

    def test_a_known_file_list_refuses_what_is_on_disk_but_not_in_it(self):
        known = {"docs/page.md", "docs/other.md"}
        targets = [t for _, _, t, _ in links.check(self.root, ["docs/page.md"], known)]
        self.assertIn("/docs/img.png", targets)
        self.assertIn("img.png", targets)

    def test_slugs_follow_githubs_rule(self):
        self.assertEqual(links.slug("Order per key; lanes"), "order-per-key-lanes")
        self.assertEqual(links.slug("`hooklane dlq` for operators"), "hooklane-dlq-for-operators")
        self.assertEqual(links.slug("What is—not met"), "what-isnot-met")
        self.assertEqual(links.slug("A [link](x.md) in it"), "a-link-in-it")
        self.assertEqual(links.slug("snake_case kept"), "snake_case-kept")
        self.assertEqual(links.slug("1b. Isolation on AWS"), "1b-isolation-on-aws")


if __name__ == "__main__":
    unittest.main()
