"""The one money formatter (an amount with thousands separators and the ISO 4217 currency code after it), and
:func:`human_number` for every other number a report shows.

``money(1234.5, "USD")`` -> ``"1,235 USD"``; ``money(12.345, "eur")`` -> ``"12.35 EUR"``; a missing amount
(``None`` / NaN) -> ``"n/a"``. No currency symbol: Jupyter's Markdown typesets ``$...$`` as LaTeX math
(https://jupyter-notebook.readthedocs.io/en/stable/examples/Notebook/Working%20With%20Markdown%20Cells.html,
"LaTeX equations"), so two dollar amounts in one Markdown line would turn into an equation; the code also names the
currency unambiguously (https://www.iso.org/iso-4217-currency-codes.html).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["actions_by_money", "human_number", "money"]

#: amounts at or above this (in absolute value) are shown without cents
_WHOLE_FROM = 100


def money(amount: float | None, currency: str = "USD") -> str:
    """``amount`` as ``"12,345 USD"`` (whole units from 100 up, cents below), ``"n/a"`` when missing."""
    if amount is None:
        return "n/a"
    x = float(amount)
    if math.isnan(x):
        return "n/a"
    cur = str(currency).strip().upper()
    text = f"{x:,.0f}" if abs(x) >= _WHOLE_FROM else f"{x:,.2f}"
    return f"{text} {cur}" if cur else text


def human_number(v: float) -> str:
    """A number as a reader takes it in: 4 significant digits at most, thousands grouped from 10,000 on, no exponent
    (a value under 0.001 in 2 significant digits, positional: ``0.000031``), ``n/a`` for an infinity or NaN."""
    x = float(v)
    if math.isinf(x) or math.isnan(x):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 10_000:
        return f"{x:,.0f}"
    # the positional formatter: https://numpy.org/doc/stable/reference/generated/numpy.format_float_positional.html
    digits = 2 if abs(x) < 0.001 else 4
    return str(np.format_float_positional(x, precision=digits, unique=True, fractional=False, trim="-"))


def actions_by_money(fs, most: int = 5) -> list[str]:
    """``"40,191 USD/month · namespace · title"`` of the findings (already sorted) with a monthly saving, largest
    first: a report's front page (:mod:`gpulib.core.verdict_block` shows the same ranking; summary.md lists it)."""
    priced = [f for f in fs if float((f.data or {}).get("monthly_saving") or 0) > 0]
    priced.sort(key=lambda f: -float(f.data["monthly_saving"]))
    return [
        " · ".join(
            x
            for x in (
                money(f.data["monthly_saving"], f.data.get("currency") or "USD") + "/month",
                str(f.data.get("namespace") or ""),
                f.title,
            )
            if x
        )
        for f in priced[:most]
    ]
