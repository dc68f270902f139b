"""``summary.md`` of a run: moved to :mod:`gpulib.core.summary` so ``gpuops run`` (cli) writes it too."""
from gpulib.core.summary import read_verdict as verdict, write_summary  # noqa: F401  (re-exported for gpulib.serve)
