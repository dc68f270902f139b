"""``gpuops`` as on-call types it, run in the test's own process (``gpulib.cli.main``, the console script's entry
point: pyproject.toml ``[project.scripts]``) for the tests whose subject is what a run decides, not the process: a
``python -m gpulib.cli`` child paid its interpreter start and the CLI's imports (papermill, nbconvert: about 2.5 s of
CPU a run) before its notebook's kernel started. The run's kernel is still a process of its own, started by the
engine as for the console script."""

from __future__ import annotations

import pytest

from gpulib import cli


def gpuops(monkeypatch, capsys, argv: list[str], env: dict[str, str] | None = None, unset=(), cwd=None):
    """Exit code, stdout and stderr of ``gpuops *argv`` with ``env`` set and ``unset`` removed (for the rest of the
    test: ``monkeypatch``), in ``cwd`` when given."""
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    if cwd is not None:
        monkeypatch.chdir(cwd)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else code if isinstance(code, int) else 1), out, err
