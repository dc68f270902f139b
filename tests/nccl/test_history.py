"""gpulib.nccl.history: history rows from judged runs, one CSV per cluster, drop findings, the demo history.

Expected numbers come from the 4 GiB rows of the real 2xH200 capture (gpulib/data/captures/2xh200_nccl_probe.txt):
all_reduce 346.80 out-of-place, all_gather 303.57 in-place, reduce_scatter 295.92 in-place, and from the
scenario file's factors (0.35 x 346.80 = 121.38)."""

from __future__ import annotations

import pandas as pd
import pytest

import gpulib.nccl as nccl
import gpulib.nccl.history as H
import gpulib.nccl.view as nv
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, demo_file
from gpulib.demo.nccl_history import demo_nccl_history

CAPTURE_TIME = "2026-11-30T04:30:33Z"


@pytest.fixture(scope="module")
def run():
    results = [r for r in nccl.parse_nccl_tests_all(demo_file(DEMO_NCCL_TESTS).read_text()) if len(r.table)]
    return results, [nccl.verdict(r) for r in results]


def test_rows_from_the_real_capture(run):
    rows = H.rows_from_run(*run, cluster="lab", timestamp=CAPTURE_TIME, instance_type="2xH200")
    assert list(rows.columns) == H.HISTORY_COLUMNS and len(rows) == 3
    got = {r.collective: (r.busbw_gbs, r.size_bytes, r.status, r.band_low_gbs) for r in rows.itertuples()}
    assert got == {
        "all_reduce": (346.80, 4294967296, "healthy", 343.3),
        "all_gather": (303.57, 4294967296, "healthy", 285.7),
        "reduce_scatter": (295.92, 4294967296, "healthy", 289.6),
    }
    assert set(rows["hosts"]) == {"vm"} and set(rows["nranks"]) == {2} and set(rows["gpu_model"]) == {"NVIDIA H200"}
    assert rows["timestamp"].iloc[0] == pd.Timestamp(CAPTURE_TIME)
    with pytest.raises(InvalidParameter, match="3 results but 1 verdicts"):
        H.rows_from_run(run[0], run[1][:1], cluster="lab")


def test_append_load_roundtrip_and_no_duplicates(run, tmp_path):
    rows = H.rows_from_run(*run, cluster="lab", timestamp=CAPTURE_TIME)
    p = H.append(rows, root=tmp_path)
    assert p == tmp_path / "lab.csv"
    assert "2026-11-30T04:30:33Z,lab,vm," in p.read_text()
    H.append(rows, root=tmp_path)  # the same run again: replaced
    assert len(H.load(p)) == 3
    later = H.rows_from_run(*run, cluster="lab", timestamp="2026-12-07T04:30:00Z")
    H.append(later, p)
    back = H.load_cluster("lab", root=tmp_path)
    assert len(back) == 6 and back["timestamp"].is_monotonic_increasing
    assert back.loc[back["collective"] == "all_reduce", "busbw_gbs"].tolist() == [346.80, 346.80]
    assert str(back["timestamp"].dt.tz) == "UTC"


def test_bad_inputs(tmp_path, run):
    with pytest.raises(InvalidParameter, match="cluster='../etc'"):
        H.default_path("../etc")
    with pytest.raises(InvalidParameter, match="does not exist"):
        H.load(tmp_path / "none.csv")
    (tmp_path / "bad.csv").write_text("when,busbw\n2026-01-01,3\n")
    with pytest.raises(InvalidParameter, match="lacks columns"):
        H.load(tmp_path / "bad.csv")
    rows = H.rows_from_run(*run, cluster="lab", timestamp=CAPTURE_TIME)
    p = H.append(rows, tmp_path / "t.csv")
    p.write_text(p.read_text().replace("2026-11-30T04:30:33Z", "last tuesday", 1))
    with pytest.raises(InvalidParameter, match="not ISO 8601"):
        H.load(p)
    with pytest.raises(InvalidParameter, match="empty"):
        H.append(rows.iloc[0:0], tmp_path / "e.csv")
    two = pd.concat([rows, rows.assign(cluster="other")])
    with pytest.raises(InvalidParameter, match="clusters"):
        H.append(two, root=tmp_path)


def _series(values, hosts="a,b", coll="all_reduce"):
    ts = pd.date_range("2026-11-01", periods=len(values), freq="7D", tz="UTC")
    return pd.DataFrame(
        {
            "timestamp": ts,
            "cluster": "c",
            "hosts": hosts,
            "instance_type": "p5.48xlarge",
            "gpu_model": "H100",
            "nranks": 16,
            "collective": coll,
            "status": "healthy",
            "busbw_gbs": values,
            "size_bytes": 1 << 32,
            "band_low_gbs": 90.0,
            "band_high_gbs": 100.0,
            "link_peak_gbs": None,
            "origin": "",
        }
    )


def test_history_findings_drop_and_steady():
    # median of 100, 102, 98, 100 = 100; tolerance 10 % -> below 90 is a drop
    drop = H.history_findings(_series([100, 102, 98, 100, 85]))
    assert len(drop) == 1 and drop[0].severity == Severity.WARNING
    assert drop[0].title == "NCCL busbw dropped on a,b (p5.48xlarge) (all_reduce)"
    assert drop[0].data["median"] == 100 and drop[0].data["latest"] == 85 and "nvidia-smi nvlink -e" in drop[0].commands
    steady = H.history_findings(_series([100, 102, 98, 100, 91]))
    assert [(f.severity, f.title) for f in steady] == [(Severity.OK, "NCCL busbw steady over time")]
    assert H.history_findings(_series([100, 100, 50])) == []  # 2 earlier runs < history_min_runs (3)
    two_groups = pd.concat([_series([100, 100, 100, 100, 60]), _series([50, 50, 50, 50, 50], hosts="c,d")])
    assert [f.data["group"] for f in H.history_findings(two_groups)] == ["a,b (p5.48xlarge)"]


def test_demo_history_from_the_real_capture():
    h = demo_nccl_history()
    assert len(h) == 27 and h["timestamp"].nunique() == 9
    real = h[h["origin"].str.startswith("capture:")]
    assert real["timestamp"].unique().tolist() == [pd.Timestamp(CAPTURE_TIME)]
    assert real.set_index("collective")["busbw_gbs"].to_dict() == {
        "all_reduce": 346.80,
        "all_gather": 303.57,
        "reduce_scatter": 295.92,
    }
    synth = h[~h["origin"].str.startswith("capture:")]
    assert synth["origin"].str.startswith("synthetic (demo)").all()
    bad = h[h["status"] != "healthy"]
    assert set(bad["timestamp"]) == {pd.Timestamp("2026-11-02T04:30:00Z")} and set(bad["status"]) == {"degraded"}
    assert bad.set_index("collective").loc["all_reduce", "busbw_gbs"] == pytest.approx(121.38)
    # the latest (real) run is within tolerance of the earlier ones: no drop
    assert [f.title for f in H.history_findings(h)] == ["NCCL busbw steady over time"]


def test_history_chart_panels_and_marks():
    h = demo_nccl_history()
    fig = nv.history_chart(h)
    assert [a.text for a in fig.layout.annotations][:3] == ["all_reduce", "all_gather", "reduce_scatter"]
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    marks = [t for t in fig.data if t.name == "not healthy"]
    assert len(lines) == 3 and len(marks) == 3 and all(len(m.x) == 1 for m in marks)
    assert fig.layout.yaxis.title.text == "busbw (GB/s)" and fig.layout.xaxis3.title.text == "run time (UTC)"
    with pytest.raises(InvalidParameter, match="empty"):
        nv.history_chart(h.iloc[0:0])


def test_reachable_as_gpulib_nccl_history():
    assert nccl.history is H
    with pytest.raises(AttributeError):
        nccl.no_such_thing
