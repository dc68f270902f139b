"""End to end with the real parts, all on 127.0.0.1 with free ports: Debian's prometheus scrapes
``gpuops exporter`` (the demo fleet) with the generated rules, Debian's prometheus-alertmanager routes the
firing GPUXidCritical alert to ``gpuops serve`` (bearer token from a credentials file), the server runs the
real xid_ecc_triage notebook for that node and GPU, and headless Chromium opens the run's HTML and the alert's
runbook_url, which lands on the same run. Every wait is bounded; every process is killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
import yaml

from gpulib.xid import write_alert_rules
from tests.helpers.procs import die_with_parent
from tests.project.test_report_browser import FLAGS, chromium_binary

ROOT = Path(__file__).resolve().parents[2]
NODE, GPU = "dgx-h100-1", "5"
TOKEN = "e2e-token-" + "x" * 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(*names: str) -> str:
    for n in names:
        if shutil.which(n):
            return shutil.which(n)
    msg = f"{names[0]} is not installed (.ci/system-deps installs it)"
    if os.environ.get("GPUOPS_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def wait_for(what: str, fn, timeout: float, every: float = 1.0):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except requests.RequestException as exc:
            last = exc
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


def spawn(procs, argv, log: Path, env=None):
    p = subprocess.Popen(
        argv,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    procs.append(p)
    return p


@pytest.mark.prometheus
@pytest.mark.notebook
def test_alert_to_verdict_with_prometheus_alertmanager_and_chromium(tmp_path, procs):
    prom, am = binary("prometheus"), binary("prometheus-alertmanager", "alertmanager")
    exe = chromium_binary()
    p_exp, p_prom, p_am, p_srv = (free_port() for _ in range(4))
    base = f"http://127.0.0.1:{p_srv}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUOPS_END="2026-11-29T12:00:00Z", GPUOPS_HOME=str(ROOT))
    env.pop("GPUOPS_SERVE_TOKEN", None)

    rules_dir = tmp_path / "rules"
    write_alert_rules(rules_dir, base)
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "1s"},
                "rule_files": [str(rules_dir / "gpu-alerts.yaml")],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{p_am}"]}]}]},
                "scrape_configs": [
                    {"job_name": "dcgm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{p_exp}"]}]}
                ],
            }
        )
    )
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "alertmanager.yml").write_text(
        yaml.safe_dump(
            {
                "route": {
                    "receiver": "null",
                    "group_by": ["alertname", "Hostname", "hostname", "gpu"],
                    "group_wait": "1s",
                    "group_interval": "5s",
                    "repeat_interval": "1h",
                    "routes": [
                        {"receiver": "gpuops", "matchers": ['alertname="GPUXidCritical"', f'hostname="{NODE}"']}
                    ],
                },
                "receivers": [
                    {"name": "null"},
                    {
                        "name": "gpuops",
                        "webhook_configs": [
                            {
                                "url": f"{base}/alertmanager",
                                "send_resolved": True,
                                "http_config": {
                                    "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "token")}
                                },
                            }
                        ],
                    },
                ],
            }
        )
    )

    spawn(procs, [sys.executable, "-m", "gpulib.cli", "exporter", "--port", str(p_exp)], tmp_path / "exporter.log", env)
    spawn(
        procs,
        [
            sys.executable,
            "-m",
            "gpulib.cli",
            "serve",
            "--port",
            str(p_srv),
            "--out",
            str(tmp_path / "runs"),
            "--token-file",
            str(tmp_path / "token"),
            "--routes-file",
            str(rules_dir / "routes.yaml"),
            "--run-timeout",
            "400",
        ],
        tmp_path / "serve.log",
        env,
    )
    spawn(
        procs,
        [
            am,
            f"--config.file={tmp_path / 'alertmanager.yml'}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{p_am}",
            "--cluster.listen-address=",
        ],
        tmp_path / "am.log",
    )
    spawn(
        procs,
        [
            prom,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{p_prom}",
        ],
        tmp_path / "prom.log",
    )

    def firing():
        r = requests.get(
            f"http://127.0.0.1:{p_am}/api/v2/alerts", params={"filter": 'alertname="GPUXidCritical"'}, timeout=5
        ).json()
        return [a for a in r if a["labels"].get("hostname") == NODE and a["labels"].get("gpu") == GPU]

    alert = wait_for("Alertmanager to hold the GPUXidCritical alert", firing, 120)[0]
    url = alert["annotations"]["runbook_url"]
    assert url == f"{base}/run/xid_ecc_triage?node={NODE}&gpu={GPU}"

    def finished():
        runs = requests.get(f"{base}/runs", params={"format": "json"}, timeout=5).json()
        mine = [r for r in runs if r["params"] == {"node": NODE, "gpu": GPU}]
        return mine if mine and all(r["status"] not in ("queued", "running", "rendering") for r in mine) else None

    runs = wait_for("the triage run to finish", finished, 420, every=2)
    assert len(runs) == 1, runs  # repeats of the group within the window were deduped
    run = runs[0]
    assert run["trigger"]["alertname"] == "GPUXidCritical" and run["trigger"]["runbook_url"] == url
    assert run["status"] == "done", run
    assert run["severity"] == "critical" and "XID 79" in run["cause"], run
    # the verdict came first (no kernel), the notebook after it, and both said the same
    assert run["verdict_by"] == "fast" and run["render"] == "done" and not run.get("verdict_changed"), run
    assert run["verdict_at"] <= run["render_finished"], run
    findings = requests.get(f"{base}/runs/{run['id']}/findings.json", timeout=5).json()
    assert findings["parameters"]["node"] == NODE and str(findings["parameters"]["gpu"]) == GPU
    assert findings["parameters"]["source"] == "demo"
    assert "**Verdict:** critical" in requests.get(f"{base}/runs/{run['id']}/summary.md", timeout=5).text
    log = [json.loads(x) for x in (tmp_path / "runs" / "alerts.jsonl").read_text().splitlines()]
    assert {e["action"] for e in log} <= {"run", "dedupe"} and sum(e["action"] == "run" for e in log) == 1

    def dom(page: str) -> str:
        prof = tmp_path / f"chrome-{len(list(tmp_path.glob('chrome-*')))}"
        out = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={prof}", "--virtual-time-budget=5000", "--dump-dom", page],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    html = dom(f"{base}/runs/{run['id']}")
    assert "gpuops-verdict" in html and 'data-severity="critical"' in html and "XID 79" in html
    opened = dom(url)  # the alert's own link: the same run, no new one
    assert f"run {run['id']}" in opened
    assert len(requests.get(f"{base}/runs", params={"format": "json"}, timeout=5).json()) == 1
    assert TOKEN not in (tmp_path / "serve.log").read_text() + html + opened
    for f in (tmp_path / "runs").rglob("*"):
        if f.is_file() and f.suffix in (".json", ".md", ".html", ".ipynb", ".log", ".jsonl"):
            assert TOKEN not in f.read_text(errors="ignore"), f
    assert urlsplit(url).path == "/run/xid_ecc_triage"
    out = os.environ.get("GPUOPS_SERVE_E2E_FIGURES")
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "alert_active_at": alert["startsAt"],
                    "run_created": run["created"],
                    "run_started": run["started"],
                    "run_finished": run["finished"],
                    "webhook_to_verdict_s": round(run["finished"] - run["created"], 1),
                    "run_s": round(run["finished"] - run["started"], 1),
                },
                indent=2,
            )
        )
    m = requests.get(f"{base}/metrics", timeout=5).text
    assert 'gpuops_serve_runs_total{outcome="critical",runbook="xid_ecc_triage"} 1.0' in m
