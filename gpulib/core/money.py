"""The one money formatter: an amount with thousands separators and the ISO 4217 currency code after it.

``money(1234.5, "USD")`` -> ``"1,235 USD"``; ``money(12.345, "eur")`` -> ``"12.35 EUR"``; a missing amount
(``None`` / NaN) -> ``"n/a"``. No currency symbol: Jupyter's Markdown typesets ``$...$`` as LaTeX math
(https://jupyter-notebook.readthedocs.io/en/stable/examples/Notebook/Working%20With%20Markdown%20Cells.html,
"LaTeX equations"), so two dollar amounts in one Markdown line would turn into an equation; the code also names the
currency unambiguously (https://www.iso.org/iso-4217-currency-codes.html).
"""

from __future__ import annotations

import math

__all__ = ["money"]

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
