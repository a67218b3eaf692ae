"""``interlock serve --sso``: single sign-on and the trusted proxy from a TOML file."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest
from _serving import serve_process
from click.testing import CliRunner

from interlock.cli import cli

HERE = Path(__file__).resolve().parent


def serve(
    tmp_path: Path,
    sso: str,
    *,
    app: str = "_serving:env_order_app",
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """The exit code and output of ``interlock serve --sso`` with ``sso`` as the file."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    path = tmp_path / "sso.toml"
    path.write_text(sso)
    args = ["serve", "--app", app, "--tokens", str(tokens), "--sso", str(path)]
    result = CliRunner().invoke(cli, args, env=env)
    return result.exit_code, " ".join(result.output.split())


OIDC = """
[oidc]
issuer = "https://login.example.com"
client_id = "interlock"
client_secret = "s3cret"
redirect_url = "https://approvals.example.com/auth/callback"
"""


@pytest.mark.parametrize(
    ("sso", "message"),
    [
        (OIDC.replace("issuer", "isuer"), "unknown field `isuer`"),
        (OIDC.replace('client_id = "interlock"', ""), "missing required field `client_id`"),
        (OIDC + '[oidc.roles]\nops = "superuser"\n', "roles"),
        (OIDC + "[oicd]\n", "unknown key(s) ['oicd']"),
        ("", "has neither [oidc] nor [proxy]"),
        ('[proxy]\naddresses = ["10.0.0.5"]\nuser = "X-User"\n', "unknown field `user`"),
        ("[proxy]\n", "missing required field `addresses`"),
        (
            OIDC.replace('redirect_url = "https://approvals.example.com/auth/callback"', ""),
            "needs redirect_url",
        ),
        (OIDC.replace('client_secret = "s3cret"', ""), "needs client_secret, or set"),
        ("[oidc", "is not valid TOML"),
    ],
)
def test_a_wrong_sso_file_is_refused_naming_what_is_wrong(
    tmp_path: Path, sso: str, message: str
) -> None:
    code, output = serve(tmp_path, sso, env={"INTERLOCK_OIDC_CLIENT_SECRET": ""})
    assert code == 2 and message in output, output


def test_the_client_secret_may_come_from_the_environment(tmp_path: Path) -> None:
    # The file is taken; what fails next is the app (named wrong here on purpose), which the
    # command opens after reading the file.
    sso = OIDC.replace('client_secret = "s3cret"', "")
    env = {"INTERLOCK_OIDC_CLIENT_SECRET": "s3cret"}
    code, output = serve(tmp_path, sso, app="_serving:no_such_app", env=env)
    assert code != 0 and "no_such_app" in output and "--sso" not in output, output


def test_serve_believes_the_proxy_named_in_the_sso_file(tmp_path: Path) -> None:
    # The proxy runs on the same machine (127.0.0.1) and says whom it forwards for in
    # X-Forwarded-For, as oauth2-proxy does: the server believes the TCP peer, not that header.
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    sso = tmp_path / "sso.toml"
    sso.write_text('[proxy]\naddresses = ["127.0.0.1"]\n[proxy.roles]\napprovers = "approver"\n')
    with serve_process(tmp_path / "o.db", tokens, extra=["--sso", str(sso)]) as running:
        headers = {
            "X-Forwarded-User": "olga",
            "X-Forwarded-Groups": "approvers",
            "X-Forwarded-For": "203.0.113.7",
        }
        assert httpx.get(f"{running.url}/v1/me", headers=headers).json()["name"] == "olga"
        # From another address the headers are nobody's word.
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport) as other:
            assert other.get(f"{running.url}/v1/me", headers=headers).status_code == 401
