"""Check that every ``owner/repo: path @commit`` citation in the repository opens: the commit exists and holds the
path. Needs full-history clones of the cited repositories under MIRRORS/<owner>+<repo>/repo, e.g.
``git clone --mirror https://github.com/NVIDIA/dcgm-exporter MIRRORS/NVIDIA+dcgm-exporter/repo``; repositories
without a clone are listed, not checked. Not part of ``make test``: it needs the network to clone.

usage: python3 .ci/check_citations.py [REPO_ROOT] [MIRRORS]     (exit 1 when a citation does not open)
"""

from __future__ import annotations

import collections
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
MIRRORS = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "mirrors")
SUFFIXES = {".csv", ".py", ".yaml", ".yml", ".md", ".ipynb", ".txt", ".json", ".toml"}
# "owner/repo: path @commit", "owner/repo path @commit", "owner/repo: path (what) @commit"
CITE = re.compile(
    r"\b([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*):? ([\w./-]+\.[A-Za-z0-9]+|[\w./-]+/)"
    r"(?:[^@\n\"]{0,80}?)@ ?([0-9a-f]{7,40})\b"
)


def _git_ok(mirror: pathlib.Path, obj: str) -> bool:
    return subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", obj], capture_output=True).returncode == 0


def main() -> int:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout.split()
    cites: dict[tuple[str, str, str], set[str]] = collections.defaultdict(set)
    for name in files:
        path = ROOT / name
        if path.suffix not in SUFFIXES:
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        for m in CITE.finditer(text):
            repo, cited, commit = m.groups()
            if not repo.startswith(("docs/", "gpulib/", "tests/")):
                cites[(repo, cited.rstrip("/"), commit)].add(name)
    bad, unchecked = [], collections.Counter()
    for (repo, cited, commit), where in sorted(cites.items()):
        mirror = MIRRORS / repo.replace("/", "+") / "repo"
        if not mirror.exists():
            unchecked[repo] += 1
        elif not _git_ok(mirror, f"{commit}^{{commit}}"):
            bad.append((repo, cited, commit, "commit not found", sorted(where)[:3]))
        elif not _git_ok(mirror, f"{commit}:{cited}"):
            bad.append((repo, cited, commit, "path not at that commit", sorted(where)[:3]))
    print(f"{len(cites)} citations, {len(bad)} do not open; not checked (no clone): {dict(unchecked)}")
    for b in bad:
        print(*b, sep=" | ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
