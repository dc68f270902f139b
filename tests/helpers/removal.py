"""The demo source without some of its inputs, as a source that does not serve them answers.

An input is named as ``gpulib/data/core/evidence.csv`` names it: a DCGM field (canonical name: gone under every
name the exporter could give it, from reads and from the preflight's inventory: EmptyResult, as every source
raises for a field it does not serve), a text input (``kernel log``, ``nvidia-smi -q``: None), a history signal
(``history:<signal>``: listed as missing, no events) or a ``vllm:`` metric (no series, no PromQL answer).
"""

from __future__ import annotations

from gpulib.core.errors import EmptyResult, NotProvided
from gpulib.demo.source import DemoSource
from gpulib.sources.history import NodeHistory
from gpulib.sources.signals import canonical

TEXT_INPUTS = {"kernel log": "_kernel_log", "nvidia-smi -q": "_smi_query", "dcgmi diag": "_diag_report"}


def remove(monkeypatch, inputs) -> None:
    inputs = set(inputs)
    fields = {i for i in inputs if i.startswith("DCGM_")}
    signals = {i.split(":", 1)[1] for i in inputs if i.startswith("history:")}
    vllm = any(i.startswith("vllm:") for i in inputs)
    for name, method in TEXT_INPUTS.items():
        if name in inputs:
            monkeypatch.setattr(DemoSource, method, lambda self, node: None)

    real_check = DemoSource._check_field

    def check(self, field):
        if field in fields or (vllm and field.startswith("vllm:")):
            raise EmptyResult(f"{field} is not exported by this source", query=field)
        return real_check(self, field)

    monkeypatch.setattr(DemoSource, "_check_field", check)
    real_inventory, real_names = DemoSource._inventory, DemoSource._node_names

    def inventory(self, window):
        names, labels = real_inventory(self, window)
        return {n for n in names if canonical(n) not in fields}, labels

    def node_names(self, window):
        out = real_names(self, window)
        return None if out is None else {k: {n for n in v if canonical(n) not in fields} for k, v in out.items()}

    monkeypatch.setattr(DemoSource, "_inventory", inventory)
    monkeypatch.setattr(DemoSource, "_node_names", node_names)
    if signals:
        real_history = DemoSource._node_history

        def history(self, window, node):
            h = real_history(self, window, node)
            ev = h.events[~h.events["signal"].isin(signals)].reset_index(drop=True)
            read = {k: v for k, v in h.read.items() if k not in signals}
            gone = {**h.missing, **{s: "not served by this source" for s in signals}}
            return NodeHistory(ev, read, gone, h.start, h.end)

        monkeypatch.setattr(DemoSource, "_node_history", history)
    if vllm:
        real_query = DemoSource.query

        def query(self, promql):
            if "vllm:" in promql:
                raise NotProvided("no vllm: series are scraped by this source")
            return real_query(self, promql)

        monkeypatch.setattr(DemoSource, "query", query)
