"""gpulib/core/runbook.py: a runbook as data. Its parameters cell is what papermill reads back; a definition with a
repeated step title or parameter is refused; the context reads and writes names as attributes."""

from __future__ import annotations

import ast
import json

import papermill
import pytest

from gpulib.core.runbook import Context, Param, Runbook, Step


def _notebook_with(cell: str, path) -> str:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": ["parameters"]},
                "source": cell,
                "outputs": [],
                "execution_count": None,
            }
        ],
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))
    return str(path)


def test_the_parameters_cell_reads_back_through_papermill_as_declared(tmp_path):
    rb = Runbook(
        "toy",
        "xid",
        params=(
            Param("node", "dgx-h100-1", "GPU node from the alert (its hostname label)"),
            Param("gpu", "", "empty: every GPU"),
            Param("after_reset", False, "true once the reset was done"),
            Param("replicas", 4, "GPU replicas per physical GPU"),
            Param("quoted", 'say "hi"', "a default with a quote"),
            Param("bare", 0.5),
        ),
        steps=(),
    )
    got = papermill.inspect_notebook(_notebook_with(rb.parameters_cell(), tmp_path / "toy.ipynb"))
    assert [(p["name"], ast.literal_eval(p["default"]), p["help"]) for p in got.values()] == [
        ("node", "dgx-h100-1", "GPU node from the alert (its hostname label)"),
        ("gpu", "", "empty: every GPU"),
        ("after_reset", False, "true once the reset was done"),
        ("replicas", 4, "GPU replicas per physical GPU"),
        ("quoted", 'say "hi"', "a default with a quote"),
        ("bare", 0.5, ""),
    ]


def test_a_default_that_is_not_a_parameter_type_is_refused():
    with pytest.raises(TypeError, match="window"):
        Param("window", {"h": 6})


def test_a_repeated_step_title_or_parameter_is_refused():
    with pytest.raises(ValueError, match="Triage"):
        Runbook("toy", "xid", params=(), steps=(Step("Triage"), Step("Impact"), Step("Triage")))
    with pytest.raises(ValueError, match="twice"):
        Runbook("toy", "xid", params=(Param("node", ""), Param("node", "x")), steps=())
    with pytest.raises(ValueError, match="record"):
        Runbook("toy", "xid", params=(Param("node", ""),), steps=(), side_effect_params=("record",))


def test_a_step_is_found_by_its_title_and_an_unknown_title_names_the_steps():
    rb = Runbook("toy", "xid", params=(), steps=(Step("Meaning"), Step("Impact")))
    assert rb.step("Impact").title == "Impact"
    with pytest.raises(KeyError, match="Meaning, Impact"):
        rb.step("Impct")


def test_a_run_acts_only_when_a_side_effect_parameter_is_true():
    rb = Runbook(
        "toy", "nccl", params=(Param("record_history", False),), steps=(), side_effect_params=("record_history",)
    )
    assert rb.acts({"record_history": True}) and not rb.acts({"record_history": False}) and not rb.acts({})


def test_the_context_is_the_namespace_it_wraps():
    ns: dict = {"node": "dgx-h100-1"}
    c = Context(ns)
    c.inp = 3
    assert ns["inp"] == 3 and c.node == "dgx-h100-1" and c.get("missing") is None
    with pytest.raises(AttributeError, match="missing"):
        c.missing
