"""The note under the triage's remediation plan says what the printed commands are: a plan made
without a cluster carries no ``--dry-run`` flag, so "run them without --dry-run" sent the reader looking for a flag
that is not there; only a server dry run's commands carry ``--dry-run=server``."""

from __future__ import annotations

from types import SimpleNamespace

from gpulib.kube.remediate import RemediationResult
from gpulib.xid.view import show_plan


class _UI:
    def __init__(self):
        self.notes: list[str] = []

    def note(self, text, level="info"):
        self.notes.append(text)

    def display(self, obj):
        pass


def _result(mode: str) -> RemediationResult:
    flag = " --dry-run=server" if mode == "server-dry-run" else ""
    return RemediationResult("cordon", "n1", mode != "applied", mode, True, "", kubectl=[f"kubectl cordon n1{flag}"])


def test_a_plan_without_a_cluster_does_not_mention_a_dry_run_flag():
    ui = _UI()
    show_plan(SimpleNamespace(plan=[_result("plan")]), ui)
    assert ui.notes and "--dry-run" not in " ".join(ui.notes)  # failed before: "... above without --dry-run"
    assert "nothing was sent" in " ".join(ui.notes).lower()


def test_a_server_dry_run_says_which_flag_to_drop():
    ui = _UI()
    show_plan(SimpleNamespace(plan=[_result("server-dry-run")]), ui)
    assert "--dry-run=server" in " ".join(ui.notes)
