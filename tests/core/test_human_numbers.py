"""Report tables show numbers a person reads: at most 4 significant digits after rounding, no exponent, no ``inf``
(the monthly reliability report printed ``33.3333``, ``0.0767677``, ``3.08111e-05`` and rate ratios of ``inf``)."""

from __future__ import annotations

import math
import re

import pandas as pd

from gpulib.runbook import table_html

#: a decimal number as it appears in text: digits with a point, or an exponent
FLOAT = re.compile(r"(?<![\w./])-?\d[\d,]*\.\d+(?:[eE][-+]?\d+)?(?![\w.]*\.\d)|(?<![\w.])-?\d+(?:\.\d+)?[eE][-+]?\d+")


def significant_digits(token: str) -> int:
    mantissa = re.split(r"[eE]", token.replace(",", "").lstrip("-"))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits)


def human_text_problems(text: str) -> list[str]:
    """Floats with more than 4 significant digits, exponents and ``inf``/``nan`` in ``text``."""
    bad = [t for t in FLOAT.findall(text) if significant_digits(t) > 4 or "e" in t.lower()]
    bad += re.findall(r"(?<![\w-])-?(?:inf|nan|NaN)(?![\w-])", text)
    return bad


def test_the_checker_sees_what_the_report_printed():
    assert human_text_problems("rate 33.3333, p 0.0767677, r 3.08111e-05, ratio inf") == [
        "33.3333", "0.0767677", "3.08111e-05", "inf"]
    assert human_text_problems("33.33, 0.07677, 1,234 USD, 12 %, >100×, n/a, infra, driver 535.183.06") == []


def test_table_cells_are_rounded_for_a_reader():
    df = pd.DataFrame({"a": [33.333333, 0.0767677, 3.08111e-05, math.inf, -math.inf, 2.0, 123456.789, 0.0]})
    text = re.sub(r"<[^>]+>", " ", table_html(df))
    assert human_text_problems(text) == []  # failed before: 33.3333, 0.0767677, 3.08111e-05, inf
    cells = text.split()
    assert cells[1:] == ["33.33", "0.07677", "0.000031", "n/a", "n/a", "2", "123,457", "0"], cells
