"""The demo backend's fleet file: ``$GPUOPS_DEMO_FLEET`` names another scenario of the same shape (the scale
benchmarks' generated fleets), so every run, kernel and verdict process started from the environment sees it."""

from __future__ import annotations

import pytest
import yaml

from gpulib.core.errors import InvalidParameter
from gpulib.demo.source import FLEET_ENV, DemoSource
from gpulib.sources import connect

PACKAGED = "gpulib/data/demo/demo_fleet.yaml"


def test_the_environment_names_the_fleet_file(tmp_path, monkeypatch):
    d = yaml.safe_load(open(PACKAGED).read())
    d["nodes"] = [dict(d["nodes"][0], name="scale-node-0"), dict(d["nodes"][1], name="scale-node-1")]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(d))
    default = set(connect("demo").nodes()["node"])
    monkeypatch.setenv(FLEET_ENV, str(path))
    assert set(connect("demo").nodes()["node"]) == {"scale-node-0", "scale-node-1"}
    assert set(DemoSource(PACKAGED).nodes()["node"]) == default  # a scenario given wins over the environment
    monkeypatch.setenv(FLEET_ENV, str(tmp_path / "missing.yaml"))
    with pytest.raises(InvalidParameter, match="missing.yaml"):
        connect("demo")


def test_an_edited_scenario_file_is_read_again_and_no_source_changes_anothers(tmp_path):
    """The parsed scenario and the simulator are shared between the sources of one process (a verdict process
    builds one per run); a changed file is a new fleet, and what one source's caller changes is not seen by the
    next source."""
    d = yaml.safe_load(open(PACKAGED).read())
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(dict(d, nodes=[dict(d["nodes"][0], name="edit-a")])))
    first = DemoSource(path, end="2026-12-01T06:45:00Z")
    assert list(first.nodes()["node"]) == ["edit-a"]
    for frame in (first.pods(), first.nodes()):
        frame["node"] = "changed-by-a-caller"
    again = DemoSource(path, end="2026-12-01T06:45:00Z")
    assert again.sim is first.sim  # one simulator per file version, end and options
    assert set(again.pods()["node"]) == {"edit-a"} and list(again.nodes()["node"]) == ["edit-a"]
    assert DemoSource(path, end="2026-12-01T06:50:00Z").sim is not first.sim  # another end, another fleet
    path.write_text(yaml.safe_dump(dict(d, nodes=[dict(d["nodes"][0], name="edit-b-longer-name")])))
    assert list(DemoSource(path, end="2026-12-01T06:45:00Z").nodes()["node"]) == ["edit-b-longer-name"]
