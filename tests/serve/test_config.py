"""gpulib.serve.config: the bearer-token rules gpuops serve and gpuops mcp share."""

from __future__ import annotations

import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.core.redact import redact
from gpulib.serve.config import bearer_refusal, read_token

TOKEN = "cfg-test-token-" + "9" * 20


@pytest.mark.parametrize(
    "header, code",
    [(None, 401), ("", 401), ("Basic abc", 401), ("Bearer", 401), ("Bearer   ", 401), ("Bearer nope", 403)],
)
def test_a_request_without_the_token_is_refused(header, code):
    assert bearer_refusal(header, TOKEN)[0] == code


def test_the_token_is_accepted_in_any_scheme_case():
    assert bearer_refusal(f"Bearer {TOKEN}", TOKEN) is None and bearer_refusal(f"bearer {TOKEN}", TOKEN) is None


def test_read_token_from_env_or_file_and_masked_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_MCP_TOKEN", TOKEN)
    assert read_token(env="GPUOPS_MCP_TOKEN") == TOKEN
    assert TOKEN not in redact(f"echo {TOKEN}")
    f = tmp_path / "tok"
    f.write_text("  file-token-" + "a" * 20 + "\n")
    assert read_token(f) == "file-token-" + "a" * 20
    with pytest.raises(InvalidParameter, match="GPUOPS_MCP_TOKEN_UNSET"):
        read_token(env="GPUOPS_MCP_TOKEN_UNSET")


@pytest.mark.parametrize("bad", [{"verdict_in": "nowhere"}, {"render_nice": 40}, {"claims": "etcd"}])
def test_a_bad_server_option_points_at_the_servers_help_not_a_runbook_cell(tmp_path, bad):
    from gpulib.serve import ServeConfig

    with pytest.raises(InvalidParameter) as err:
        ServeConfig.build(out=tmp_path, token="t" * 40, **bad)
    assert "gpuops serve --help" in str(err.value) and "parameters cell" not in str(err.value)
