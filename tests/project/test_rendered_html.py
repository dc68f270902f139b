"""Every HTML page `gpuops demo` writes reads cleanly in an incident channel: no NaN / <NA> / None cells, no
pandas index column, no dict or list repr, no text cut with "…" in any rendered table, and no section heading
with nothing under it.

One `gpuops demo --out DIR` run per session (``shared_runs.demo()``, tests/helpers/shared_runs.py) is shared by
every check here and by the other tests that read the demo's outputs."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.notebook


class _Tables(HTMLParser):
    """Cells of every <table>: (table index, row index, is_header, text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells: list[tuple[int, int, bool, str]] = []
        self._t, self._r, self._cell, self._depth = -1, -1, None, 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
            self._t += 1
            self._r = -1
        elif tag == "tr" and self._depth:
            self._r += 1
        elif tag in ("td", "th") and self._depth:
            self._cell = [tag == "th", ""]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append((self._t, self._r, self._cell[0], self._cell[1].strip()))
            self._cell = None
        elif tag == "table":
            self._depth -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


_BAD_CELL = [
    (re.compile(r"^(NaN|nan|<NA>|None|NaT)$"), "missing value shown raw"),
    (re.compile(r"^[\[{].*[:'\"].*[\]}]$"), "dict/list repr"),
    (re.compile(r"…$|\.\.\.$"), "text cut with an ellipsis"),
]


def problems_in(html_text: str) -> list[str]:
    p = _Tables()
    p.feed(html_text)
    out = []
    for t, r, is_header, text in p.cells:
        for rx, why in _BAD_CELL:
            if rx.search(text):
                out.append(f"table {t} row {r}: {why}: {text[:80]!r}")
    # pandas' index column: the header row starts with an empty <th> and body rows start with a <th> 0, 1, 2...
    by_table: dict[int, list] = {}
    for t, r, is_header, text in p.cells:
        by_table.setdefault(t, []).append((r, is_header, text))
    for t, cells in by_table.items():
        firsts = {}
        for r, is_header, text in cells:
            firsts.setdefault(r, (is_header, text))
        rows = sorted(firsts)
        if (
            len(rows) >= 3
            and firsts[rows[0]] == (True, "")
            and all(firsts[r][0] and firsts[r][1] == str(i) for i, r in enumerate(rows[1:]))
        ):
            out.append(f"table {t}: pandas index column")
    return out


class _Sections(HTMLParser):
    """The page as a sequence of events: ("h", level, text) a heading, ("code", 0, "") where a code cell starts,
    ("md"|"out", 0, what) content inside a markdown cell or elsewhere (a cell's output, the page itself): visible
    text outside a heading, or a table, image, chart. Script, style and the document head are not content.
    The cell classes are those of nbconvert's lab template (jp-MarkdownCell, jp-CodeCell)."""

    _SKIP = {"script", "style", "head", "title"}
    _OBJECTS = {"table", "img", "svg", "iframe", "canvas"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[str, int, str]] = []
        self._skip = 0
        self._heading: list | None = None
        self._divs: list[str | None] = []

    def _content(self, what: str) -> None:
        self.events.append(("md" if "md" in self._divs else "out", 0, what))

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._skip += 1
            return
        if self._skip:
            return
        cls = (dict(attrs).get("class") or "").split()
        if tag == "div":
            kind = "md" if "jp-MarkdownCell" in cls else "code" if "jp-CodeCell" in cls else None
            self._divs.append(kind)
            if kind == "code":
                self.events.append(("code", 0, ""))
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = [int(tag[1]), ""]
        elif tag in self._OBJECTS or (tag == "div" and "plotly-graph-div" in cls):
            self._content(tag)

    def handle_endtag(self, tag):
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif self._skip:
            return
        elif tag == "div" and self._divs:
            self._divs.pop()
        elif re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.events.append(("h", self._heading[0], self._heading[1].replace("\u00b6", "").strip()))
            self._heading = None

    def handle_data(self, data):
        if self._skip:
            return
        if self._heading is not None:
            self._heading[1] += data
        elif data.strip():
            self._content(data.strip()[:40])


def empty_sections(html_text: str, levels=(2, 3)) -> list[str]:
    """Headings (h2/h3) with nothing under them before the next heading of the same or a higher level: no
    content at all, or code cells that showed nothing (the section's own explanation is not a result: a step that
    finds nothing says so, e.g. ``rb.report(..., empty=...)``)."""
    p = _Sections()
    p.feed(html_text)
    ev, out = p.events, []
    for i, (kind, level, text) in enumerate(ev):
        if kind != "h" or level not in levels:
            continue
        j = i + 1
        while j < len(ev) and not (ev[j][0] == "h" and ev[j][1] <= level):
            j += 1
        body = {k for k, _, _ in ev[i + 1 : j]}
        if not body & {"md", "out"}:
            out.append(f"h{level} {text!r} has nothing under it")
        elif "code" in body and "out" not in body:
            out.append(f"h{level} {text!r}: its code cells showed nothing")
    return out


@pytest.fixture(scope="session")
def demo_html(shared_runs):
    demo = shared_runs.demo()
    out, p = demo.out, demo.proc
    pages = sorted(out.glob("*/*.html"))
    assert pages, p.stdout[-2000:] + p.stderr[-2000:]
    return out, pages, p


def test_scanner_catches_planted_reprs():
    import pandas as pd

    bad = pd.DataFrame({"gpu": [1.0, None], "labels": [{"a": 1}, ["x", "y"]], "note": ["fine", "cut off…"]})
    found = " ".join(problems_in(bad.to_html()))
    for why in ("missing value", "dict/list repr", "ellipsis", "pandas index column"):
        assert why in found, found
    assert (
        problems_in(bad.fillna("").astype(str).assign(labels="a=1").to_html(index=False).replace("cut off…", "cut off"))
        == []
    )


def test_no_raw_reprs_in_any_rendered_table(demo_html):
    out, pages, _ = demo_html
    problems = [f"{p.relative_to(out)}: {x}" for p in pages for x in problems_in(p.read_text(errors="replace"))]
    assert not problems, "\n".join(problems[:80])


def test_summary_md_beside_each_runbook_html(demo_html):
    out, pages, _ = demo_html
    runs = [p for p in pages if not p.parent.name.split("-")[1].startswith("learn_")]
    missing = [str(p.parent.name) for p in runs if not (p.parent / "summary.md").is_file()]
    assert not missing, missing
    text = (runs[0].parent / "summary.md").read_text()
    assert "**Verdict:**" in text and "Parameters:" in text


def test_kernel_warning_not_shown(demo_html):
    _, _, proc = demo_html
    assert "without encryption" not in proc.stdout + proc.stderr


def _planted_notebook_html(tmp_path) -> str:
    """A notebook with outputs already in place (no kernel), exported the way `gpuops run` exports a run:
    a Diagnosis section whose only code cell showed nothing."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from gpulib.execute import export_html

    note = new_output(
        "display_data",
        data={
            "text/html": "<div style='border-left:4px solid #1b7f3b'>No XID.</div>",
            "text/plain": "<IPython.core.display.HTML object>",
        },
    )
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Planted"),
            new_markdown_cell("## Meaning"),
            new_code_cell("nb.note(...)", outputs=[note]),
            new_markdown_cell("## Impact\n### Pods on the GPU"),
            new_code_cell("print(...)", outputs=[new_output("stream", name="stdout", text="2 pods\n")]),
            new_markdown_cell("## Diagnosis\nThe XID timeline."),
            new_code_cell("if False:\n    display(x)", outputs=[]),
            new_markdown_cell("## Mitigation\n### Remediation plan (dry run)"),
            new_code_cell("pass", outputs=[]),
            new_markdown_cell("### Recommended SOP step"),
            new_code_cell("rb.finish()", outputs=[note]),
        ],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    path = tmp_path / "planted.ipynb"
    nbformat.write(nb, str(path))
    return export_html(path, tmp_path / "planted.html", "Planted").read_text()


def test_empty_section_scanner_catches_a_planted_empty_section(tmp_path):
    found = empty_sections(_planted_notebook_html(tmp_path))
    assert found == [
        "h2 'Diagnosis': its code cells showed nothing",
        "h3 'Remediation plan (dry run)' has nothing under it",
    ], found
    # an h2 whose content is all in its h3 sub-sections is not empty; a chart or table alone is content
    assert empty_sections(
        "<h2>A</h2><h3>B</h3><p>x</p><h2>C</h2><table><tr><td></td></tr></table>"
        "<h3>D</h3><div class='plotly-graph-div'></div><h3>E</h3><script>var a=1</script>"
    ) == ["h3 'E' has nothing under it"]


def test_no_section_of_any_rendered_page_is_empty(demo_html):
    out, pages, _ = demo_html
    problems = [f"{p.relative_to(out)}: {x}" for p in pages for x in empty_sections(p.read_text(errors="replace"))]
    assert not problems, "\n".join(problems)


def _runbooks_and_report():
    from gpulib.catalogue import catalogue

    return sorted((i for i in catalogue().values() if i.kind != "learn"), key=lambda i: i.name)


@pytest.mark.parametrize("info", _runbooks_and_report(), ids=lambda i: i.name)
def test_no_section_is_empty_when_the_data_is_missing(info, tmp_path, kept_execute):
    """On a snapshot folder with no files every step that reads data fails: the steps that need its result say
    so in their own section instead of showing nothing."""
    empty = tmp_path / "empty-snapshot"
    empty.mkdir()
    res = kept_execute(info, {"source": "snapshot", "snapshot_dir": str(empty)}, tmp_path / "out", progress=False)
    assert res.failed is None, res.failed
    assert res.errors or res.usage_errors, "an empty snapshot must make the run incomplete"
    found = empty_sections(res.html.read_text(errors="replace"))
    assert not found, "\n".join(found)
