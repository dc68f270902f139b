"""Self-checks ask for judgement (24 of 35 once asked for a number printed just above them): each puts the
reader in a situation and asks what they would do or why, and its collapsed answer says what and its explanation
why. Read off every lesson run at its defaults (tests/helpers/lesson_runs.py)."""

from __future__ import annotations

import re

import pytest

from gpulib.run.catalogue import LESSONS
from tests.helpers.lesson_runs import run_lesson

#: how a question that asks to read a figure back starts (the 24 rewritten ones did: "How many concurrent...",
#: "How big is...", "How long does...", "At what GPU temperature...", "Which label tells you...", "busbw / algbw...")
LOOKUP = re.compile(r"^(how (many|much|big|long)|at what|what is the|which \w+ (tells|is)|busbw)\b", re.I)


def problems(check) -> list[str]:
    out = []
    if LOOKUP.search(check.question):
        out.append("asks to read a figure back")
    if not re.search(r"\b(you|your|why|should)\b", check.question, re.I):
        out.append("does not ask the reader to decide")
    if len(check.answer.split()) < 6:
        out.append(f"answer {check.answer!r} says what, not why")
    if len(check.why.split()) < 6:
        out.append("no explanation of why the answer is right")
    return out


def test_the_check_catches_a_lookup_question():
    from gpulib.learn.lessons import question

    old = question("How many 1g.10gb instances fit on an H100-80GB alongside a 3g.40gb?", "4", "placement", show=False)
    assert set(problems(old)) >= {"asks to read a figure back", "does not ask the reader to decide"}
    good = question(
        "A team asks for one more instance than fits. What do you offer them?",
        "An instance on another GPU, because this one is full.",
        "MIG geometry changes only with the GPU's instances torn down.",
        show=False,
    )
    assert problems(good) == []


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_every_self_check_asks_for_judgement_and_explains_its_answer(name):
    checks = run_lesson(name).checks
    assert checks
    assert {c.question: problems(c) for c in checks if problems(c)} == {}
