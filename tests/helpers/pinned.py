"""The demo scenario the integration tests pin in time, the repository root, and the Prometheus requirement."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.helpers.promharness import binaries

ROOT = Path(__file__).resolve().parents[2]
#: the end of the pinned demo scenario used by integration tests
DEMO_END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
#: window backfilled into Prometheus (the runbooks' default window fits inside it)
BACKFILL_WINDOW = "6h10m"
#: scrape interval of the integration scenario (coarser than the demo's 30 s to keep the TSDB small)
SCRAPE = "60s"


def need_prometheus():
    prom, tool = binaries()
    if not (prom and tool):
        msg = "Debian's prometheus/promtool are not installed (.ci/run installs them: apt-get install prometheus)"
        if os.environ.get("GPUOPS_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
