"""The README's first screen is for a user: what this is, the demo command, a screenshot of a verdict and where to
click next; contributor material (lint, test timings) lives in CONTRIBUTING.md; ``make demo`` needs no root when the
system packages are already there."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a first screen: what a 50-line terminal or the top of the GitHub page shows
FIRST_SCREEN = 50


def _first_screen() -> str:
    return "\n".join((ROOT / "README.md").read_text().splitlines()[:FIRST_SCREEN])


def test_the_first_screen_says_what_it_is_how_to_try_it_and_shows_a_verdict():
    top = _first_screen()
    assert "make demo" in top
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", top)
    assert images, "no screenshot on the first screen"  # failed before: no image anywhere in the README
    for img in images:
        p = ROOT / img
        assert p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", img
    assert "reports/out/index.html" in top  # where the demo's pages are
    assert re.search(r"(?i)where to (click|go) next", top)


def test_contributor_material_is_in_contributing():
    top = _first_screen()
    for contributor in ("ruff", "--durations", "pycodestyle", "make test"):
        assert contributor not in top, contributor  # failed before: ruff's line length on the first screen
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for needed in ("make test", "ruff check", "How long `make test` takes"):
        assert needed in contributing, needed
    assert "CONTRIBUTING.md" in (ROOT / "README.md").read_text()


def test_make_demo_installs_no_test_extras():
    text = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo:(.*)$", text, re.M).group(1).split()
    assert "setup" not in demo and "system-deps" not in demo  # failed before: demo: setup (root, .[all,test])
    recipe = text.split("\ndemo:")[1].split("\n\n")[0]
    assert ".[all,test]" not in recipe


def _stub(folder: Path, name: str, body: str = "exit 0") -> None:
    p = folder / name
    p.write_text(f"#!/bin/sh\n{body}\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_system_deps_asks_for_no_root_when_every_package_is_there(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    calls = tmp_path / "calls"
    for tool in ("prometheus", "promtool", "chromium", "alertmanager", "kubectl"):
        _stub(bin_, tool)
    for tool in ("sudo", "apt-get", "id"):
        _stub(bin_, tool, f'echo {tool} "$@" >> {calls}; [ {tool} = id ] && echo 1000; exit 0')
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path)}
    env["PATH"] = f"{bin_}:" + ":".join(p for p in ("/bin", "/usr/bin") if os.path.isdir(p))
    p = subprocess.run(["bash", str(ROOT / ".ci" / "system-deps")], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert not calls.exists() or "apt-get" not in calls.read_text()
    # kubectl missing: it is one of the packages asked for (the printed-command tests run the real kubectl)
    (bin_ / "kubectl").unlink()
    hidden = tmp_path / "nokubectl"
    hidden.mkdir()
    env["PATH"] = f"{bin_}:{hidden}"
    for tool in ("bash", "cat", "grep", "sh"):  # what the script itself needs, without /usr/bin's kubectl
        real = next((Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists()), None)
        if real is not None:
            (hidden / tool).symlink_to(real)
    subprocess.run([str(hidden / "bash"), str(ROOT / ".ci" / "system-deps")], env=env, capture_output=True, text=True)
    assert "kubectl" in calls.read_text()  # failed before: kubectl was never checked
