"""Where the fast verdict lived before :mod:`gpulib.run.verdict`: the same names, for callers not yet moved."""

from __future__ import annotations

from gpulib.run.verdict import FastVerdict, fast_verdict, supports

__all__ = ["FastVerdict", "fast_verdict", "supports"]
