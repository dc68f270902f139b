"""The run's HTML export (gpulib/run/render.py ``export_html``) keeps one exporter per process: each page it writes
is the page a new exporter writes, whatever was exported before it, from one thread or several."""

from __future__ import annotations

import sys
import threading

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gpulib.core.redact import redact
from gpulib.run.render import export_html


def _notebook(i: int):
    """Notebooks that differ where an export reads them: the kernel's language (the code highlighter), markdown
    with maths and a table, HTML, text and error outputs, metadata."""
    lexer = ("ipython3", "python", "bash")[i % 3]
    out = [
        new_output("display_data", data={"text/html": f"<b>run {i}</b>", "text/plain": f"run {i}"}),
        new_output("stream", name="stdout", text=f"line {i}\n"),
    ]
    if i % 2:
        out.append(new_output("error", ename="ValueError", evalue=f"bad {i}", traceback=[f"ValueError: bad {i}"]))
    return new_notebook(
        cells=[
            new_markdown_cell(f"# Run {i}\n\n$x^{i}$ and a table:\n\n| a | b |\n|---|---|\n| {i} | `code` |"),
            new_code_cell(f"x = {i}\nprint('line', x)", outputs=out),
            new_markdown_cell("## After\n<details><summary>more</summary>text</details>"),
        ],
        metadata={
            "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
            "language_info": {"name": "python", "pygments_lexer": lexer},
            "papermill": {"parameters": {"node": f"n{i}"}},
        },
    )


def _fresh(path, title: str) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(
        nbformat.read(str(path), as_version=4), resources={"metadata": {"name": title}}
    )
    return redact(body)


def test_each_export_is_what_a_new_exporter_writes(tmp_path):
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"nb{i}.ipynb")
        nbformat.write(_notebook(i), str(paths[-1]))
    for i, p in enumerate(paths + paths[::-1]):  # each after others, in both orders
        got = export_html(p, tmp_path / f"{i}.html", f"Title {p.stem}").read_text()
        assert got == _fresh(p, f"Title {p.stem}"), p
        assert f"<title>Title {p.stem}</title>" in got and f"run {p.stem[2:]}" in got


def test_exports_from_several_threads_are_each_their_own(tmp_path):
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"nb{i}.ipynb")
        nbformat.write(_notebook(i), str(paths[-1]))
    want = {p: _fresh(p, p.stem) for p in paths}
    got: dict = {}

    def export(p, k):
        got[(p, k)] = export_html(p, tmp_path / f"{p.stem}-{k}.html", p.stem).read_text()

    threads = [threading.Thread(target=export, args=(p, k)) for k in range(3) for p in paths]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, so exports interleave wherever they are not locked
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(got) == len(threads)
    for (p, _), text in got.items():
        assert text == want[p], p
