"""Repository rules a reader relies on: every citation opens, every data row names its source.

The rules are the ones ``docs/architecture.md`` ("Where knowledge lives", "Citations") states: a comment,
docstring, fixture README or data ``source`` cell cites a URL, ``owner/repo: path`` (at a commit where
one is known), a file of this repository, or says ``inferred``/``measured``/``synthetic``; it never points
at notes that are not shipped or at an issue number of a tracker the repository does not link.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "gpulib" / "data"
#: where citations live (the tree a reader gets)
CITING_TREES = ["gpulib", "runbooks", "reports", "tests", "benchmarks", "deploy", "docs"]
TEXT_SUFFIXES = {".py", ".md", ".csv", ".yaml", ".yml", ".ipynb", ".txt", ".toml", ".cfg", ""}
#: the background notes of the project's authors, which the repository does not ship (spelled in pieces so
#: that a grep for them finds no hit in the repository itself)
_NOTES = ["facts" + ".md", "design" + ".md", "prior" + "-art"]
UNSHIPPED = re.compile("|".join(re.escape(n) for n in _NOTES))
#: a bare tracker reference (the word issue and a number, or a number in parentheses) that names no repository
BARE_ISSUE = re.compile(r"(?<![\w/.-])(?:issues? #?\d+|\(#\d+\))", re.I)
OWNER_REPO_ISSUE = re.compile(r"[\w.-]+/[\w.-]+(?:#| issues? #?| PRs? #?| pull #?)\d+", re.I)

URL = re.compile(r"https?://\S+")
#: ``owner/repo: path`` (or ``owner/repo path @ commit``): a file in a public repository
OWNER_REPO_PATH = re.compile(r"\b[\w.-]+/[\w.-]+: \S+|\b[\w.-]+/[\w.-]+ [\w./*{}-]+ ?@ ?[0-9a-f]{7,40}\b")
LOCAL_PATH = re.compile(r"\b((?:gpulib|tests|docs|benchmarks|deploy|runbooks|reports)/[\w./*{}-]+)")
#: a cell that says what it is instead of citing: derived by us, measured by us, made up for the demo, or a
#: choice of this project (a policy value with its reason)
SELF_DECLARED = re.compile(r"^(inferred|measured|synthetic|project policy|project convention|definition)\b", re.I)


def _ignored() -> set[Path]:
    """Files git ignores (a benchmark's cached TSDB, a run's output): not the repository's text, not checked."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "ls-files", "-o", "-i", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): every file is checked
        return set()
    return {ROOT / f for f in out.decode(errors="replace").split("\0") if f}


def _files(trees):
    ignored = _ignored()
    for t in trees:
        base = ROOT / t
        if not base.exists():
            continue
        for p in sorted(base.rglob("*")):
            if (
                p.is_file()
                and p not in ignored
                and p.suffix in TEXT_SUFFIXES
                and "__pycache__" not in p.parts
                and "captures" not in p.relative_to(ROOT).parts[:3]
            ):
                yield p


def _bare_issues(line: str) -> list[str]:
    scrubbed = OWNER_REPO_ISSUE.sub("", URL.sub("", line))
    return BARE_ISSUE.findall(scrubbed)


def test_no_unshipped_citations():
    """No file cites the unshipped notes (``_NOTES``) or a bare issue number."""
    this = Path(__file__).resolve()
    bad = []
    for p in _files(CITING_TREES + ["README.md"] if (ROOT / "README.md").exists() else CITING_TREES):
        if p.resolve() == this:
            continue
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if UNSHIPPED.search(line) or _bare_issues(line):
                bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    readme = ROOT / "README.md"
    for n, line in enumerate(readme.read_text().splitlines(), 1):
        if UNSHIPPED.search(line) or _bare_issues(line):
            bad.append(f"README.md:{n}: {line.strip()[:120]}")
    assert not bad, "citations a reader cannot open:\n" + "\n".join(bad)


def test_the_citation_rules_catch_what_they_should():
    """The patterns above flag the shapes this repository used to have, and pass the ones it uses now."""
    assert UNSHIPPED.search(f"NVIDIA catalog ({_NOTES[0]} §1.3)") and UNSHIPPED.search(f"see {_NOTES[2]}.md 9")
    bare = "iss" + "ue"
    assert _bare_issues(f"the degraded example of {bare} 5") and _bare_issues(f"{bare} #7 (allocatable 0)")
    assert _bare_issues("fixed in (#12)")
    assert not _bare_issues("NVIDIA/nccl-tests#294 and NVIDIA/mig-parted issue #120")
    assert not _bare_issues("https://github.com/NVIDIA/gpu-operator/issues/262")
    assert not _source_problem("NVIDIA/DCGM: dcgmlib/dcgm_fields.h @ 72fa3fea")
    assert not _source_problem("inferred: project policy")
    assert not _source_problem("skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @001367d2 ($32.77/h)")
    assert _source_problem("NVIDIA GPU Operator install docs") and _source_problem("tests/fixtures/no_such_file.txt")
    assert _source_problem(f"NVIDIA catalog ({_NOTES[0]} 1.3)")


def _source_problem(cell: str) -> str | None:
    """Why a ``source`` cell does not give the reader something to open (None when it does)."""
    s = str(cell).strip()
    if not s or s.lower() == "nan":
        return "empty"
    if UNSHIPPED.search(s) or _bare_issues(s):
        return "cites unshipped notes or a bare issue number"
    for m in LOCAL_PATH.finditer(OWNER_REPO_PATH.sub(" ", URL.sub(" ", s))):
        path = m.group(1).rstrip(".,;)")
        if not any(ROOT.glob(path)):
            return f"cites {path}, which is not in the repository"
    if (
        URL.search(s)
        or OWNER_REPO_PATH.search(s)
        or OWNER_REPO_ISSUE.search(s)
        or LOCAL_PATH.search(OWNER_REPO_PATH.sub(" ", URL.sub(" ", s)))
        or SELF_DECLARED.match(s)
    ):
        return None
    return "no URL, owner/repo: path, repository file, or inferred/measured/synthetic"


def _yaml_sources(node, where=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "source" and isinstance(v, str):
                yield where, v
            else:
                yield from _yaml_sources(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _yaml_sources(v, f"{where}[{i}]")


def _tables():
    return sorted(p for p in DATA.glob("*/*.csv"))


@pytest.mark.parametrize("path", _tables(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_data_row_cites_what_a_reader_can_open(path):
    df = pd.read_csv(path, keep_default_na=False)
    assert "source" in df.columns, f"{path.name} has no source column"
    bad = [(i + 2, why, s[:100]) for i, s in enumerate(df["source"].astype(str)) if (why := _source_problem(s))]
    assert not bad, f"{path.relative_to(ROOT)} (line, why, cell):\n" + "\n".join(map(str, bad))


@pytest.mark.parametrize("path", sorted(DATA.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_yaml_source_cites_what_a_reader_can_open(path):
    doc = yaml.safe_load(path.read_text())
    bad = [(w, why, s[:100]) for w, s in _yaml_sources(doc) if (why := _source_problem(s))]
    assert not bad, f"{path.relative_to(ROOT)}:\n" + "\n".join(map(str, bad))


def test_data_lives_in_domain_folders_and_every_file_ships():
    """Tables sit one level down (``gpulib/data/<domain>/``), names are unique, and the wheel's package-data
    globs cover every file there (a table the globs miss would be absent from an installed package)."""
    assert not [p.name for p in DATA.iterdir() if p.is_file()], "a file directly in gpulib/data/"
    names = [p.name for p in DATA.glob("*/*") if p.suffix in (".csv", ".yaml")]
    assert len(names) == len(set(names)), "a table name in two domain folders"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gpulib"]
    missed = [
        str(p.relative_to(ROOT / "gpulib"))
        for p in DATA.rglob("*")
        if p.is_file() and not any(fnmatch.fnmatch(str(p.relative_to(ROOT / "gpulib")), g) for g in globs)
    ]
    assert not missed, f"not shipped by pyproject package-data: {missed}"


def test_each_real_capture_exists_once_and_is_described():
    """One copy of each capture: no byte-identical file elsewhere under gpulib/data or tests/fixtures, and a
    README row for every file in gpulib/data/captures/."""
    caps = {p.name: p.read_bytes() for p in (DATA / "captures").iterdir() if p.name != "README.md"}
    readme = (DATA / "captures" / "README.md").read_text()
    assert not [n for n in caps if n not in readme], "capture without a README row"
    others = [
        p
        for base in (DATA, ROOT / "tests" / "fixtures")
        for p in base.rglob("*")
        if p.is_file() and p.parent != DATA / "captures" and p.stat().st_size
    ]
    blobs = {}
    for n, b in caps.items():
        if b:
            blobs.setdefault(b, n)
    dupes = [f"{p.relative_to(ROOT)} = captures/{blobs[p.read_bytes()]}" for p in others if p.read_bytes() in blobs]
    assert not dupes, "copies of a capture:\n" + "\n".join(dupes)


def _doc_tree() -> set[str]:
    """Paths named in the tree block of docs/architecture.md (indentation = depth, two spaces a level)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("<!-- tree:begin -->")[1].split("<!-- tree:end -->")[0]
    stack: list[str] = []
    out = set()
    for line in block.splitlines():
        if not line.strip() or line.startswith("```"):
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        name = line.split()[0]
        stack = stack[:depth] + [name.rstrip("/")]
        out.add("/".join(stack))
    return out


def _package_tree() -> set[str]:
    pkg = ROOT / "gpulib"
    out = {"gpulib"}
    for p in pkg.rglob("*"):
        rel = p.relative_to(ROOT)
        if "__pycache__" in rel.parts or p.name == "__init__.py" and p.parent != pkg:
            continue
        if p.is_dir() and (p.parent.name != "data" or p.parent.parent == pkg) and len(rel.parts) <= 3:
            out.add(str(rel))
        elif p.suffix == ".py":
            out.add(str(rel))
    return out


def test_the_architecture_tree_matches_the_package():
    doc, real = _doc_tree(), _package_tree()
    assert not real - doc, f"in gpulib/ but not in docs/architecture.md's tree: {sorted(real - doc)}"
    assert not doc - real, f"in docs/architecture.md's tree but not in gpulib/: {sorted(doc - real)}"


def test_the_readme_layout_names_every_package():
    text = (ROOT / "README.md").read_text()
    layout = text.split("## Layout")[1].split("\n## ")[0]
    pkgs = [p.name for p in (ROOT / "gpulib").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert not [p for p in pkgs if f"{p}/" not in layout], "README Layout misses a gpulib package"
    assert "docs/architecture.md" in layout


TESTS = ROOT / "tests"
#: test folders that are not a gpulib package: shared doubles and servers, notebook runs, cross-cutting suites,
#: and the two data folders (hand-built inputs, decision tables)
TEST_FOLDERS = {"helpers": "code", "runbooks": "code", "project": "code", "fixtures": "data", "decisions": "data"}
#: files of tests/runbooks/ that run every notebook rather than one
ALL_NOTEBOOK_SUITES = {"test_notebooks.py", "test_nbval.py"}


def _test_tree_problems(tests: Path, gpulib: Path, notebooks: set[str]) -> list[str]:
    """Why ``tests`` does not mirror ``gpulib`` (docs/architecture.md, "Tests"): every folder is a gpulib
    package or one of ``TEST_FOLDERS``, every code folder (and ``tests`` itself) is a Python package so one
    basename may appear in two folders, a test at the top level tests a top-level module
    (``test_cli*.py``), helpers hold no tests and tests sit nowhere else, and each file of
    ``tests/runbooks/`` is named after a notebook."""
    packages = {p.name for p in gpulib.iterdir() if (p / "__init__.py").exists()}
    top_modules = {p.stem for p in gpulib.glob("*.py") if p.name != "__init__.py"}
    out = []
    if not (tests / "__init__.py").exists():
        out.append("tests/__init__.py missing")
    for d in sorted(p for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"):
        kind = "code" if d.name in packages else TEST_FOLDERS.get(d.name)
        if kind is None:
            out.append(f"tests/{d.name}/ is neither a gpulib package nor one of {sorted(TEST_FOLDERS)}")
            continue
        if kind == "data":
            stray = [p.name for p in d.rglob("test_*.py")]
            out += [f"tests/{d.name}/{n}: a test in a data folder" for n in stray]
            continue
        if not (d / "__init__.py").exists():
            out.append(f"tests/{d.name}/__init__.py missing")
        subdirs = [p.name for p in d.iterdir() if p.is_dir() and p.name != "__pycache__"]
        out += [f"tests/{d.name}/{s}/: one folder level only" for s in subdirs]
        for f in sorted(d.glob("*.py")):
            if f.name == "__init__.py":
                continue
            is_test = f.name.startswith("test_")
            if d.name == "helpers" and is_test:
                out.append(f"tests/helpers/{f.name}: a test among the helpers")
            elif d.name != "helpers" and not is_test:
                out.append(f"tests/{d.name}/{f.name}: a helper outside tests/helpers/")
            elif (
                d.name == "runbooks"
                and f.name not in ALL_NOTEBOOK_SUITES
                and not any(f.stem == f"test_{n}" or f.stem.startswith(f"test_{n}_") for n in notebooks)
            ):
                out.append(f"tests/runbooks/{f.name}: not named after a notebook")
    for f in sorted(tests.glob("*.py")):
        if f.name in ("__init__.py", "conftest.py"):
            continue
        if not any(f.stem == f"test_{m}" or f.stem.startswith(f"test_{m}_") for m in top_modules):
            out.append(f"tests/{f.name}: only tests of a top-level module (gpulib/<module>.py) sit in tests/")
    return out


def test_the_test_tree_mirrors_the_package():
    from gpulib.catalogue import catalogue

    assert _test_tree_problems(TESTS, ROOT / "gpulib", set(catalogue())) == []


def test_the_test_tree_check_catches_a_flat_or_misplaced_file(tmp_path):
    gp, t = tmp_path / "gpulib", tmp_path / "tests"
    for d in (gp / "xid", t / "xid", t / "helpers", t / "runbooks", t / "fixtures"):
        d.mkdir(parents=True)
    for f in (
        gp / "__init__.py",
        gp / "xid" / "__init__.py",
        gp / "cli.py",
        t / "__init__.py",
        t / "helpers" / "__init__.py",
        t / "runbooks" / "__init__.py",
        t / "xid" / "test_triage.py",
        t / "test_cli.py",
        t / "runbooks" / "test_xid_ecc_triage.py",
        t / "fixtures" / "dmesg.txt",
    ):
        f.write_text("")
    assert _test_tree_problems(t, gp, {"xid_ecc_triage"}) == ["tests/xid/__init__.py missing"]
    (t / "xid" / "__init__.py").write_text("")
    assert _test_tree_problems(t, gp, {"xid_ecc_triage"}) == []
    for f in (
        t / "test_triage.py",
        t / "helpers" / "test_double.py",
        t / "xid" / "double.py",
        t / "runbooks" / "test_xid.py",
        t / "fixtures" / "test_old.py",
    ):
        f.write_text("")
    (t / "triage").mkdir()
    assert _test_tree_problems(t, gp, {"xid_ecc_triage"}) == [
        "tests/fixtures/test_old.py: a test in a data folder",
        "tests/helpers/test_double.py: a test among the helpers",
        "tests/runbooks/test_xid.py: not named after a notebook",
        (
            "tests/triage/ is neither a gpulib package nor one of ['decisions', 'fixtures', 'helpers', "
            "'project', 'runbooks']"
        ),
        "tests/xid/double.py: a helper outside tests/helpers/",
        "tests/test_triage.py: only tests of a top-level module (gpulib/<module>.py) sit in tests/",
    ]
