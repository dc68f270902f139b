"""gpulib.core.knowledge: tables are found by name in gpulib/data/<domain>/, a name in two folders is an error."""

from __future__ import annotations

import pytest

import gpulib.core.knowledge as K
from gpulib.core.errors import GpulibError


@pytest.fixture()
def fake_data(tmp_path, monkeypatch):
    """A data tree of our own, with the loader's caches emptied before and after."""
    monkeypatch.setattr(K, "_root", lambda: tmp_path)
    for f in (K._index, K._load_csv):
        f.cache_clear()
    yield tmp_path
    for f in (K._index, K._load_csv):
        f.cache_clear()


def test_shipped_tables_load_by_bare_name_from_their_domain_folder():
    cat = K.load_table("xid_catalog")
    assert K.data_path("xid_catalog.csv").parent.name == "xid"
    assert 79 in set(cat["code"])  # XID 79: fallen off the bus
    assert K.data_path("operator_sop.yaml").parent.name == "gpu_operator"
    assert K.load_table("learn/storage_tiers").equals(K.load_table("storage_tiers"))


def test_a_name_in_two_folders_is_an_error(fake_data):
    for dom in ("xid", "nccl"):
        (fake_data / dom).mkdir()
        (fake_data / dom / "thresholds.csv").write_text("key,value,source\na,1,inferred: test\n")
    with pytest.raises(GpulibError, match="ambiguous: nccl/thresholds.csv, xid/thresholds.csv") as e:
        K.load_table("thresholds")
    assert "rename" in e.value.hint
    assert K.load_table("xid/thresholds")["value"].tolist() == [1]  # the folder-qualified name still works


def test_a_missing_table_and_a_row_without_source_are_errors(fake_data):
    (fake_data / "core").mkdir()
    (fake_data / "core" / "t.csv").write_text("key,value,source\na,1,\n")
    with pytest.raises(GpulibError, match="not shipped"):
        K.load_table("nope")
    with pytest.raises(GpulibError, match="have no source"):
        K.load_table("t")
