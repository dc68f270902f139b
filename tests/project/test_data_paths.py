"""Every ``gpulib/data/...`` path that a .py or .md file of the repository cites exists.

Data files live in ``gpulib/data/<domain>/<file>`` (``docs/architecture.md``, "Where knowledge lives"); a
citation of the older flat spelling (``remediation_policy.csv`` right under ``gpulib/data/``, for
``gpulib/data/kube/remediation_policy.csv``) sends a reader to nothing. A path with a placeholder in it
(``gpulib/data/<domain>/``, ``gpulib/data/{name}.csv``, ``gpulib/data/*/``) names a pattern, not a file,
and is left out; so is one built in an f-string.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: where a reader meets citations: the package, the notebooks' folders, tests, benchmarks, docs, the README
CITING = ["gpulib", "tests", "benchmarks", "runbooks", "reports", "docs", "README.md"]
#: ``gpulib/data/`` and what follows up to a character no path of the repository uses
DATA_PATH = re.compile(r"gpulib/data/[^\s`'\"()\[\],;:|]*")
PLACEHOLDER = re.compile(r"[<>{}*]")


def cited_data_paths(text: str) -> list[str]:
    """The concrete ``gpulib/data/...`` paths in ``text`` (trailing sentence punctuation cut, patterns left out)."""
    out = []
    for m in DATA_PATH.finditer(text):
        p = m.group(0).rstrip(".")
        if not PLACEHOLDER.search(p) and p.rstrip("/") != "gpulib/data":
            out.append(p)
    return out


def missing_data_paths(root: Path, citing: list[str] = CITING) -> list[str]:
    """``file:line: path`` for each cited ``gpulib/data/...`` path under ``root`` that does not exist there."""
    problems = []
    for top in citing:
        base = root / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.suffix in (".py", ".md"))
        for f in files:
            if not f.is_file():
                continue
            for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                for p in cited_data_paths(line):
                    if not (root / p).exists():
                        problems.append(f"{f.relative_to(root).as_posix()}:{n}: {p}")
    return problems


def test_every_cited_data_path_exists():
    missing = missing_data_paths(ROOT)
    assert not missing, "cited data paths that do not exist (data lives in gpulib/data/<domain>/):\n" + "\n".join(
        missing
    )


def test_the_check_catches_a_flat_data_path_and_passes_the_domain_one(tmp_path):
    flat = "gpulib/data/" + "remediation_policy.csv"  # in two pieces, so this file cites no flat path itself
    (tmp_path / "gpulib" / "data" / "kube").mkdir(parents=True)
    (tmp_path / "gpulib" / "data" / "kube" / "remediation_policy.csv").write_text("key,value,source\n")
    (tmp_path / "gpulib" / "kube.py").write_text(
        f'"""A number of ``{flat}``."""\n'
        "# the same number as in gpulib/data/kube/remediation_policy.csv, and gpulib/data/<domain>/<name>.csv\n"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("See `gpulib/data/xid/xid_sop.csv`.\n")
    assert missing_data_paths(tmp_path, ["gpulib", "docs"]) == [
        f"gpulib/kube.py:1: {flat}",
        "docs/page.md:1: gpulib/data/xid/xid_sop.csv",
    ]
