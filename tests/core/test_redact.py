"""No configured secret reaches a message, a findings file, the notebook HTML or the terminal."""

from __future__ import annotations

import base64

import pytest

from gpulib.core.errors import GpulibError, InvalidParameter, PrometheusError
from gpulib.core.findings import Finding, FindingList, Severity, save_findings
from gpulib.sources.prometheus import PrometheusSource, load_settings
from tests.helpers.faultserver import FaultServer

TOKEN = "s3cr3t-t0ken-AbC123xyz"
USER, PASSWORD = "oncall", "pa55-w0rd-Zq9"


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_TOKEN", TOKEN)
    monkeypatch.setenv("GPUOPS_PROMETHEUS_USER", USER)
    monkeypatch.setenv("GPUOPS_PROMETHEUS_PASSWORD", PASSWORD)


def _clean(text: str) -> bool:
    b64 = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    return TOKEN not in text and PASSWORD not in text and b64 not in text


def test_error_body_echoing_the_authorization_header_is_redacted(secret_env, monkeypatch):
    monkeypatch.delenv("GPUOPS_PROMETHEUS_USER")  # bearer only (basic auth would replace the header)
    with FaultServer("echo_auth") as fs:
        monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", fs.url)
        src = PrometheusSource(end="2026-11-29T12:00:00Z")
        with pytest.raises(PrometheusError) as e:
            src.summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert fs.auth and TOKEN in fs.auth[0]  # the server did see (and echo) it
    assert _clean(str(e.value)) and _clean(repr(e.value.args))


def test_basic_auth_echo_is_redacted(monkeypatch):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_USER", USER)
    monkeypatch.setenv("GPUOPS_PROMETHEUS_PASSWORD", PASSWORD)
    with FaultServer("echo_auth") as fs:
        monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", fs.url)
        with pytest.raises(PrometheusError) as e:
            PrometheusSource(end="2026-11-29T12:00:00Z").summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert fs.auth[0].startswith("Basic ") and _clean(str(e.value))


def test_token_with_trailing_cr_is_stripped_and_never_echoed(monkeypatch, tmp_path):
    tf = tmp_path / "token"
    tf.write_text(TOKEN + "\r\n")
    s = load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://127.0.0.1:1", "GPUOPS_PROMETHEUS_TOKEN": TOKEN + "\r"})
    assert s.token == TOKEN
    with pytest.raises(InvalidParameter) as e:
        load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://127.0.0.1:1", "GPUOPS_PROMETHEUS_TOKEN": "ab\x01" + TOKEN})
    assert TOKEN not in str(e.value)


def test_url_credentials_are_never_echoed():
    for url in ("ftp://user:hunter22@host/x", "http://user:hunter22@prom:9090"):
        with pytest.raises(InvalidParameter) as e:
            load_settings(env={"GPUOPS_PROMETHEUS_URL": url})
        assert "hunter22" not in str(e.value)


def test_findings_json_text_and_html_are_redacted(secret_env, tmp_path):
    f = Finding(
        Severity.WARNING,
        f"denied for Bearer {TOKEN}",
        summary=f"user {USER} pw {PASSWORD}",
        evidence=[f"Authorization: Basic {base64.b64encode(f'{USER}:{PASSWORD}'.encode()).decode()}"],
        commands=[f"curl -H 'Authorization: Bearer {TOKEN}' http://prom"],
        data={"body": TOKEN},
    )
    path = save_findings([f], tmp_path / "findings.json", parameters={"x": TOKEN}, errors=[f"step: {TOKEN}"])
    assert _clean(path.read_text())
    assert _clean(f.as_text()) and _clean(f._repr_html_()) and _clean(FindingList([f])._repr_html_())


def test_guarded_step_renders_no_secret(secret_env, capsys):
    from gpulib.runbook import guarded_step

    errors: list[str] = []
    with guarded_step("Query", errors):
        raise GpulibError(f"x {TOKEN}", hint=f"y {PASSWORD}")
    out = capsys.readouterr().out
    assert errors and _clean(errors[0]) and _clean(out)


def test_papermill_failure_line_is_redacted(secret_env):
    from gpulib.core.redact import redact

    assert _clean(redact(f"KeyError: 'Bearer {TOKEN}' {PASSWORD}"))


@pytest.mark.parametrize("how", ["env", "token_file", "settings", "connect_live"])
def test_bearer_token_and_basic_auth_together_is_a_usage_error_at_connect(secret_env, monkeypatch, tmp_path, how):
    """Both set is ambiguous (requests' basic auth would silently replace the bearer header): refuse at connect
    time, naming both variables, never a secret."""
    import gpulib
    from gpulib.sources.prometheus import PrometheusSettings

    with FaultServer("echo_auth") as fs:  # would answer if the source ever sent a request
        monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", fs.url)
        with pytest.raises(InvalidParameter) as e:
            if how == "env":
                PrometheusSource(end="2026-11-29T12:00:00Z")
            elif how == "token_file":
                monkeypatch.delenv("GPUOPS_PROMETHEUS_TOKEN")
                monkeypatch.delenv("GPUOPS_PROMETHEUS_PASSWORD")  # a user alone is basic auth too
                (tmp_path / "token").write_text(TOKEN + "\n")
                monkeypatch.setenv("GPUOPS_PROMETHEUS_TOKEN_FILE", str(tmp_path / "token"))
                PrometheusSource(end="2026-11-29T12:00:00Z")
            elif how == "settings":
                PrometheusSource(
                    settings=PrometheusSettings(url=fs.url, token=TOKEN, user=USER, password=PASSWORD),
                    end="2026-11-29T12:00:00Z",
                )
            else:
                gpulib.connect("live", end="2026-11-29T12:00:00Z")
    assert not fs.auth  # refused before any request
    text = f"{e.value} {e.value.hint}"
    assert "GPUOPS_PROMETHEUS_TOKEN" in text and "GPUOPS_PROMETHEUS_USER" in text, text
    assert _clean(text) and _clean(repr(e.value.args)) and USER not in text


def test_bearer_token_alone_and_basic_auth_alone_still_connect(monkeypatch):
    for env in (
        {"GPUOPS_PROMETHEUS_TOKEN": TOKEN},
        {"GPUOPS_PROMETHEUS_USER": USER, "GPUOPS_PROMETHEUS_PASSWORD": PASSWORD},
    ):
        s = load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://127.0.0.1:1", **env})
        assert (s.token, s.user) in ((TOKEN, None), (None, USER))


def _whole_text_subs(text: str) -> str:
    """What redact did before its scan for where a match can start: each pattern's ``sub`` over the whole text."""
    from gpulib.core.redact import _AUTH, _URL_CRED, MASK

    text = _AUTH.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _URL_CRED.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def test_redact_masks_what_the_whole_text_patterns_mask(monkeypatch):
    """The scan for where a match can start (gpulib/core/redact.py ``_AUTH_START``, ``_URL_TAIL``) changes nothing:
    on texts built from the patterns' pieces (words glued to others, blanks, URL schemes, credentials, ``@``) and on
    the plotly.js bundle every inline report carries, redact gives what the two patterns' ``sub`` give."""
    import random

    from plotly.offline import get_plotlyjs

    from gpulib.core.redact import redact

    for k in ("GPUOPS_PROMETHEUS_TOKEN", "GPUOPS_PROMETHEUS_PASSWORD", "GPUOPS_PROMETHEUS_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    pieces = ["Bearer", "Basic", "bearer", "BEARER", "BASIC", "bAsic", "xBasic", "Basics", " ", "  ", "\n", "\t",
              "tok3n", "a.b~c+d/e=f-g", "_", "é", "HTTPS://", "http://", "s3://", "x+y.z-1://", "://", "user", ":",
              "pw", "@", "/", "host", "#define BASIC 4", "'", '"', "=", "Authorization: "]  # fmt: skip
    rnd = random.Random(20261205)
    texts = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 40))) for _ in range(5000)]
    texts += [get_plotlyjs(), "Basic Basic abc Bearer\tx:y BASIC\n\n4 http://u:p@h https://a:b@c/d@e"]
    changed = 0
    for text in texts:
        assert redact(text) == _whole_text_subs(text), text
        changed += redact(text) != text
    assert changed > 1000  # the texts do hold matches (not a comparison of texts nothing matches in)


def test_the_inlined_plotly_js_is_left_as_it_is(monkeypatch):
    """Every inline report and executed notebook carries plotly.js; its WebGL shader source holds ``#define BASIC 4``,
    which redact turned into ``#define BASIC ***`` (a shader that no longer compiles). Failed before."""
    from plotly.offline import get_plotlyjs

    from gpulib.core.redact import redact

    for k in ("GPUOPS_PROMETHEUS_TOKEN", "GPUOPS_PROMETHEUS_PASSWORD", "GPUOPS_PROMETHEUS_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    js = get_plotlyjs()
    assert "#define BASIC 4" in js
    assert redact(js) == js


def test_a_basic_credential_is_base64_of_at_least_four_characters(monkeypatch):
    """RFC 7617 section 2: the Basic credentials are the base64 (RFC 4648 section 4: groups of four characters) of
    ``user-id ":" password``, so the shortest is four characters (``Og==`` for ``:``); a Bearer token (RFC 6750
    section 2.1, b64token) may be one character."""
    from gpulib.core.redact import redact

    for k in ("GPUOPS_PROMETHEUS_TOKEN", "GPUOPS_PROMETHEUS_PASSWORD", "GPUOPS_PROMETHEUS_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    creds = base64.b64encode(b"a:b").decode()
    assert redact(f"Authorization: Basic {creds}") == "Authorization: Basic ***"
    assert redact("BASIC Og==") == "BASIC ***"
    assert redact(f"-H 'Authorization: basic {creds}'") == "-H 'Authorization: basic ***'"  # the scheme: any case
    assert redact("Bearer x") == "Bearer ***"
    assert redact("#define BASIC 4") == "#define BASIC 4"
    assert redact("Basic abc") == "Basic abc"
