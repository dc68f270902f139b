"""plotly.js for the exported reports, in three ways (:data:`gpulib.inspection.PLOTLY_JS_MODES`): inline in each
report, from the CDN, or one shared copy, ``plotly-<version>.min.js``, beside the run folders (a run store of
``gpuops serve``, the ``--out`` folder of ``gpuops demo``) that each report names as ``../plotly-<version>.min.js``: a
run then weighs what it shows, not plotly.js's ~5 MB each. The file is the plotly package's own bundle
(``plotly.offline.get_plotlyjs``, https://plotly.com/python-api-reference/generated/plotly.offline.get_plotlyjs.html).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import uuid
from pathlib import Path

from plotly.offline import get_plotlyjs, get_plotlyjs_version

from gpulib.core.settings import CHARTS_ENV, env

#: the name of a shared copy, any version (a store keeps the copy older runs name after an upgrade)
SHARED_NAME = re.compile(r"^plotly-\d+\.\d+\.\d+\.min\.js$")


def plotly_js_file() -> str:
    """The shared copy's file name, with the package's plotly.js version in it: a page that names it always gets the
    version it was drawn with, and a cache may keep it for good."""
    return f"plotly-{get_plotlyjs_version()}.min.js"


def write_plotly_js(root: Path) -> Path:
    """``root/plotly-<version>.min.js``, the package's plotly.js, written once (whole, through a temporary file; a
    complete copy already there is kept). The folder that holds the run folders: a report of the "shared" mode names
    it as ``../plotly-<version>.min.js``."""
    path = Path(root) / plotly_js_file()
    data = get_plotlyjs().encode()
    if path.is_file() and path.stat().st_size == len(data):
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def charts_mode(*choices: str | None) -> str:
    """How a run ships plotly.js: the first of ``choices`` that names a way (the run's ``charts`` parameter, its
    caller's choice), else ``GPUOPS_CHARTS`` (declared default: inline, a report that opens offline). The one rule
    for the engine, which writes the shared copy, and the kernel, which names it."""
    return next((str(c) for c in choices if c), "") or env(CHARTS_ENV)


def plotly_loader(mode: str) -> str:
    """The script tags that load plotly.js in ``mode``, as plotly's own ``to_html`` writes them
    (https://github.com/plotly/plotly.py/blob/main/plotly/io/_html.py, ``include_plotlyjs``)."""
    config = "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
    if mode == "inline":
        return f"{config}<script>{get_plotlyjs()}</script>"
    if mode == "cdn":  # the bundled file's hash: a CDN serving anything else is refused (Subresource Integrity)
        sri = base64.b64encode(hashlib.sha256(get_plotlyjs().encode()).digest()).decode()
        return (
            f'{config}<script charset="utf-8" src="https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js" '
            f'integrity="sha256-{sri}" crossorigin="anonymous"></script>'
        )
    return f'{config}<script charset="utf-8" src="../{plotly_js_file()}"></script>'
