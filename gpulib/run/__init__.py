"""Everything that happens to one run of a runbook, one owner each (docs/architecture.md "A runbook is defined
once"): :mod:`~gpulib.run.catalogue` (the one list of runbook definitions), :mod:`~gpulib.run.notebook` (the
kernel side: a notebook renders its runbook's steps), :mod:`~gpulib.run.verdict` (the same steps without a
kernel: the fast verdict of ``gpuops run``, ``gpuops serve`` and ``gpuops mcp``)."""
