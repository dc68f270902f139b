"""``gpuops serve`` keeps plotly.js once per run store: written at start as ``plotly-<version>.min.js`` under the
store, served at ``/plotly-<version>.min.js`` with caching headers, and named by every report it renders
(``../plotly-<version>.min.js`` from ``/runs/<id>``), so a run folder weighs what it shows. Failed before: no route
(404), and each run folder carried plotly.js twice (about 11 MB a run)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin

import pytest
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from gpulib.serve.retention import folder_bytes
from tests.serve.test_app import make

SHARED = f"plotly-{get_plotlyjs_version()}.min.js"


def test_the_store_keeps_one_plotly_js_and_serves_it_with_caching_headers(tmp_path):
    app, c = make(tmp_path)
    make(tmp_path)  # a second start (or replica) on the store: still one copy
    root = Path(app.state.service.store.root)
    assert [p.name for p in root.glob("plotly-*")] == [SHARED]
    r = c.get(f"/{SHARED}")
    assert r.status_code == 200 and r.content == get_plotlyjs().encode()
    assert r.headers["content-type"].startswith("text/javascript")
    cache = r.headers["cache-control"]
    assert "immutable" in cache and int(cache.split("max-age=")[1].split(",")[0]) >= 30 * 86400
    assert r.headers.get("etag")  # a revalidation costs a 304, not 5 MB
    assert c.get(f"/{SHARED}", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    for bad in ("/plotly-0.0.1.min.js", "/plotly-..%2Frun.json.min.js", "/plotly-x.min.js"):
        assert c.get(bad).status_code == 404, bad


@pytest.mark.notebook
def test_a_rendered_run_names_the_stores_copy_and_weighs_under_a_megabyte(tmp_path):
    """The default runner (the notebook in this process): the report page names the store's plotly.js, which the
    page's URL resolves to the route above; the run folder is under 1 MB."""
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app
    from tests.serve.test_app import TOKEN

    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, warm_kernels=0, verdict="notebook")
    app = create_app(cfg)
    c = TestClient(app)
    rid = app.state.service.start("fleet_overview", {}, {"url": "/run/fleet_overview"})["id"]  # small charts
    assert app.state.service.join(600)
    page_url = f"http://testserver/runs/{rid}"
    page = c.get(page_url).text
    assert page.count(f'src="../{SHARED}"') == 1 and f"plotly.js v{get_plotlyjs_version()}" not in page
    asset = c.get(urljoin(page_url, f"../{SHARED}"))
    assert asset.status_code == 200 and len(asset.content) == len(get_plotlyjs().encode())
    folder = app.state.service.store.folder(rid)
    assert folder_bytes(folder) < 1_000_000, folder_bytes(folder)
