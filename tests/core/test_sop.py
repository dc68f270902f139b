"""gpulib.core.sop: SOP rows from data, placeholders filled, command values shell-quoted."""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.core import sop as sopmod
from gpulib.core.errors import GpulibError


@pytest.fixture
def table(monkeypatch):
    rows = pd.DataFrame(
        [
            {
                "key": "drain",
                "summary": "{n} pods on {node}",
                "sop_step": "Drain {node} ({share:.0%} of the pool).",
                "escalation": "",
                "commands": "kubectl drain {node}\nkubectl get pods -o jsonpath='{{.items}}' -n {ns}\n"
                "kubectl -n {ns} delete pod {pod}",
                "source": "https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/",
            },
            {
                "key": "bare",
                "summary": "",
                "sop_step": "Nothing to fill.",
                "escalation": float("nan"),
                "commands": float("nan"),
                "source": "definition: test row",
            },
        ]
    )
    monkeypatch.setattr(sopmod, "load_table", lambda name: rows.copy())
    sopmod._rows.cache_clear()
    yield "test_sop"
    sopmod._rows.cache_clear()


def test_texts_are_filled_with_format_specs(table):
    s = sopmod.sop(table, "drain", node="gpu-1", n=3, share=0.25, ns="ml", pod="<pod>")
    assert s.summary == "3 pods on gpu-1"
    assert s.sop_step == "Drain gpu-1 (25% of the pool)."


def test_command_values_are_one_shell_word_and_reader_placeholders_stay(table):
    s = sopmod.sop(table, "drain", node="gpu-1; rm -rf /", n=1, share=0.1, ns="ml", pod="<pod>")
    assert s.commands[0] == "kubectl drain 'gpu-1; rm -rf /'"
    assert s.commands[1] == "kubectl get pods -o jsonpath='{.items}' -n ml"
    assert s.commands[2] == "kubectl -n ml delete pod <pod>"


def test_empty_cells_give_empty_text_and_no_commands(table):
    s = sopmod.sop(table, "bare")
    assert (s.sop_step, s.escalation, s.commands) == ("Nothing to fill.", "", [])


def test_unknown_key_and_missing_value_are_errors_naming_the_row(table):
    with pytest.raises(GpulibError, match="no row 'nope'.*"):
        sopmod.sop(table, "nope")
    with pytest.raises(GpulibError, match=r"row 'drain' uses \{node\}"):
        sopmod.sop(table, "drain", n=1, share=0.1, ns="ml", pod="x")
    assert sopmod.keys(table) == ["bare", "drain"]
