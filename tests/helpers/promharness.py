"""Run Debian's real ``prometheus`` on 127.0.0.1 over a TSDB backfilled from a demo scenario."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import requests

from tests.helpers.procs import die_with_parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binaries() -> tuple[str | None, str | None]:
    return shutil.which("prometheus"), shutil.which("promtool")


def backfill(sim, window: str, workdir: Path, step: float | None = None) -> Path:
    """Write the scenario as OpenMetrics and turn it into TSDB blocks with promtool."""
    om = workdir / "scenario.om"
    tsdb = workdir / "tsdb"
    sim.write_openmetrics(om, window, step)
    blocks_from_openmetrics(om, tsdb)
    return tsdb


#: blocks of up to 90 days: promtool's default 2-hour blocks cost ~25x the CPU on a 9-day history (10.6 s vs 0.4 s,
#: 109 blocks vs 2) for the same samples; "when backfilling data over a long range of times, it may be advantageous to
#: use a larger value for the block-duration to backfill faster"
#: (https://prometheus.io/docs/prometheus/latest/storage/#backfilling-from-openmetrics-format)
MAX_BLOCK = "--max-block-duration=2160h"


def blocks_from_openmetrics(om: Path, tsdb: Path) -> None:
    """``promtool tsdb create-blocks-from openmetrics OM TSDB`` (blocks of up to :data:`MAX_BLOCK`), then the text
    file is deleted."""
    subprocess.run(
        [binaries()[1], "tsdb", "create-blocks-from", "openmetrics", MAX_BLOCK, str(om), str(tsdb)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    om.unlink()


class PrometheusServer:
    def __init__(self, tsdb: Path, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = workdir / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1h\n  evaluation_interval: 1h\nscrape_configs: []\n")
        self.log = open(workdir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [
                binaries()[0],
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tsdb}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=20y",
                "--query.lookback-delta=5m",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self.proc.returncode}: {(workdir / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready within 60 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def backfill_rules(
    url: str, rules_file: Path, start: float, end: float, outdir: Path, *, relative: bool = False, big: bool = False
) -> list[Path]:
    """Evaluate the recording rules of ``rules_file`` against the Prometheus at ``url`` from ``start`` to ``end``
    (``promtool tsdb create-blocks-from rules``, each group at its own interval) into TSDB blocks under
    ``outdir``; returns the block folders (move them into a TSDB and restart Prometheus to query them).
    ``relative``: promtool runs in the rule file's folder and is given its bare name, which is then the groups'
    ``file`` and so sets their evaluation phase (tests/helpers/promphase.py) whatever the folder; ``big``: blocks
    of up to :data:`MAX_BLOCK` (one range query per rule and block instead of one per 2 hours)."""
    outdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            binaries()[1],
            "tsdb",
            "create-blocks-from",
            *([MAX_BLOCK] if big else []),
            "rules",
            f"--start={int(start)}",
            f"--end={int(end)}",
            f"--url={url}",
            f"--output-dir={outdir.resolve()}",
            rules_file.name if relative else str(rules_file),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=rules_file.parent if relative else None,
    )
    return sorted(p for p in outdir.iterdir() if p.is_dir() and (p / "meta.json").exists())


def with_rules(tsdb: Path, url: str, groups: list, rule_file: str, start: float, end: float, here: Path):
    """A Prometheus on a copy of ``tsdb`` (under ``here``) plus ``groups`` evaluated by promtool over [start, end]
    against the Prometheus at ``url``, from the rule file ``here/rule_file`` given by its bare name (so its name sets
    each group's evaluation phase: tests/helpers/promphase.py)."""
    import yaml

    here.mkdir()
    rules = here / rule_file
    rules.write_text(yaml.safe_dump({"groups": groups}))
    ruled = here / "tsdb"
    shutil.copytree(tsdb, ruled)
    for block in backfill_rules(url, rules, start, end, here / "blocks", relative=True, big=True):
        shutil.move(str(block), ruled / block.name)
    return PrometheusServer(ruled, here)


def history_frame(hist):
    """A node history's events in one order, the value as float: two histories compare with assert_frame_equal."""
    from gpulib.core.schema import HISTORY_COLUMNS

    ev = hist.events[list(HISTORY_COLUMNS)].copy()
    ev["value"] = ev["value"].astype(float)
    return ev.sort_values(["time", "node", "gpu", "signal", "code", "detail"], kind="stable").reset_index(drop=True)
