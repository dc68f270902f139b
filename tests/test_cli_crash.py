"""``gpuops run`` that crashes (a full disk, no memory) exits 3 ("the run failed"), never 1 ("a finding stands"),
and says why in one line instead of a traceback."""

from __future__ import annotations

import errno

import pytest
from typer.testing import CliRunner

import gpulib.cli as cli


@pytest.mark.parametrize(
    "crash",
    [OSError(errno.ENOSPC, "No space left on device"), MemoryError(), RuntimeError("a bug in the engine")],
    ids=["full_disk", "memory", "bug"],
)
def test_a_run_that_crashes_exits_3(tmp_path, monkeypatch, crash):
    def execute(*args, **kwargs):
        raise crash

    monkeypatch.setattr(cli.engine, "execute", execute)
    r = CliRunner().invoke(cli.app, ["run", "fleet_overview", "--out", str(tmp_path), "-q"])
    assert r.exit_code == cli.EXIT_FAILED, (r.exit_code, r.output, r.exception)
    assert type(crash).__name__ in r.output and "Traceback" not in r.output
