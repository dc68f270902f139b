"""A simulator's memo: results that are pure functions of what the simulator was built from (every series value is,
:mod:`gpulib.demo.metrics`), kept so a process that asks the same question again (a verdict process serves many runs
of one shared simulator, :func:`gpulib.demo.simulator.shared_simulator`) does not compute it again.

Bounded, least recently used first out: at most ``entries`` results and ``rows`` frame rows in all (a result
weighs its row count, anything else 1; one heavier than ``rows`` is not kept). Callers cannot change what is kept:
a DataFrame comes back as a copy, an array read-only; other results must be immutable (str, tuples, None).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

import numpy as np
import pandas as pd

#: default bounds per simulator. A frame row of the long SERIES frame holds a timestamp, a value and ten label
#: pointers (the label strings themselves are shared between rows): about 100 bytes, so 200,000 rows is about
#: 20 MB per simulator, 160 MB at most over shared_simulator's 8 simulators. The packaged fleet's widest frame
#: (72 devices x 721 points) is 52k rows; a generated fleet's wider frames are not kept.
ENTRIES = 256
ROWS = 200_000


def _weight(value: Any) -> int:
    return len(value) if isinstance(value, (pd.DataFrame, np.ndarray)) else 1


def _out(value: Any) -> Any:
    return value.copy() if isinstance(value, pd.DataFrame) else value


class Memo:
    """Results under hashable keys, bounded by ``entries`` and ``rows`` (see the module's doc)."""

    def __init__(self, entries: int = ENTRIES, rows: int = ROWS):
        self.entries, self.rows = entries, rows
        self._kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def weight(self) -> int:
        """Rows (and other results) kept now."""
        return self._weight

    def get(self, key: Hashable, build: Callable[[], Any], weight: Callable[[Any], int] | None = None) -> Any:
        """The result kept under ``key``, else ``build()``'s (kept within the bounds). A DataFrame is a copy.
        ``weight``: the result's weight in rows where it is not a frame or an array (a tuple of samples: their
        count)."""
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None:
                self._kept.move_to_end(key)
                return _out(hit[0])
        value = build()
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.flags.writeable = False
        heavy = weight(value) if weight is not None else _weight(value)
        if heavy <= self.rows:
            kept = value.copy() if isinstance(value, pd.DataFrame) else value
            with self._lock:
                old = self._kept.pop(key, None)
                self._weight -= old[1] if old else 0
                self._kept[key] = (kept, heavy)
                self._weight += heavy
                while len(self._kept) > self.entries or self._weight > self.rows:
                    self._weight -= self._kept.popitem(last=False)[1][1]
        return value
