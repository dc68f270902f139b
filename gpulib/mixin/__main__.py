"""``python -m gpulib.mixin [--out DIR] ...``: the same as ``gpuops mixin``."""

import typer

from gpulib.mixin.build import mixin_cmd

if __name__ == "__main__":  # pragma: no cover
    typer.run(mixin_cmd)
