"""Tokens, identities and scopes, tried as a stranger would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.server import Identity, TokenAuth, hash_token, new_token


def auth() -> TokenAuth:
    return TokenAuth({hash_token("right"): Identity(name="ana", role="approver")})


@given(st.text())
def test_any_header_is_refused_or_recognised_never_an_error(header: str) -> None:
    found = auth().authenticate(header)
    assert found is None or found.name == "ana"
    assert auth().authenticate(f"Bearer {header}") is (None if header.strip() != "right" else found)


def test_only_the_right_bearer_token_is_recognised() -> None:
    a = auth()
    assert a.authenticate("Bearer right") == Identity(name="ana", role="approver")
    assert a.authenticate("bearer   right ") is not None
    for header in (None, "", "Bearer", "Bearer ", "Basic right", "right", "Bearer wrong"):
        assert a.authenticate(header) is None


def test_a_token_is_configured_by_its_hash_only() -> None:
    token = new_token()
    assert len(token) >= 43 and token != new_token()
    with pytest.raises(ValueError, match="never the token itself"):
        TokenAuth({token: Identity(name="ana")})
    with pytest.raises(TypeError):
        hash_token(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two identities"):
        TokenAuth({hash_token("a"): Identity(name="x"), hash_token("b"): Identity(name="x")})
    with pytest.raises(ValueError, match="empty scope"):
        TokenAuth({hash_token("a"): Identity(name="x", tools=())})
    with pytest.raises(ValueError, match="printable"):
        TokenAuth({hash_token("a"): Identity(name="")})
    with pytest.raises(TypeError, match="Identity"):
        TokenAuth({hash_token("a"): "ana"})  # type: ignore[dict-item]


def test_roles_include_the_ones_below_and_scopes_match_as_documented() -> None:
    viewer, admin = Identity(name="v"), Identity(name="a", role="admin")
    assert viewer.can("viewer") and not viewer.can("approver")
    assert admin.can("viewer") and admin.can("approver") and admin.can("admin")
    mailer = Identity(name="m", tools=("send_*",), threads=("ops-", "mail-"))
    assert mailer.sees("ops-1", "send_email")
    assert not mailer.sees("ops-1", None)  # a question that gates no tool is the tool ""
    assert not mailer.sees("billing-1", "send_email")
    assert Identity(name="all").sees("anything", None)


def test_a_damaged_or_wrong_tokens_file_is_refused_with_what_is_wrong(tmp_path: Path) -> None:
    missing = tmp_path / "none.toml"
    with pytest.raises(ValueError, match="cannot read"):
        TokenAuth.from_file(missing)
    broken = tmp_path / "broken.toml"
    broken.write_bytes(b"[[identity]\nname = \xff")
    with pytest.raises(ValueError, match="not valid"):
        TokenAuth.from_file(broken)
    wrong_role = tmp_path / "role.json"
    entry = {"name": "a", "role": "god", "token_sha256": hash_token("t")}
    wrong_role.write_text(json.dumps({"identity": [entry]}))
    with pytest.raises(ValueError, match="identity #1"):
        TokenAuth.from_file(wrong_role)
    good = tmp_path / "good.toml"
    good.write_text(
        f'[[identity]]\nname = "ana"\nrole = "admin"\ntoken_sha256 = "{hash_token("t")}"\n'
        'threads = ["ops-"]\n'
    )
    found = TokenAuth.from_file(good).authenticate("Bearer t")
    assert found == Identity(name="ana", role="admin", threads=("ops-",))


ANA = hash_token("ana-token")


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        # The attack: a scope misspelt would leave the identity every thread...
        (f'[[identity]]\nname = "ana"\ntoken_sha256 = "{ANA}"\nthread = ["ops-"]\n', "thread", 4),
        # ...or an invented limit would limit nothing.
        (
            f'# ana\n\n[[identity]]\nname = "ana"\nrole = "admin"\nexpires = 2030-01-01\n'
            f'token_sha256 = "{ANA}"\n',
            "expires",
            6,
        ),
        (f'[[identity]]\nname = "ana"\ntoken_sha256 = "{ANA}"\ntools = "send_*"\n', "tools", 4),
        (f'[[identity]]\nname = "ana"\ntoken_sha256 = "{ANA}"\nrole = 3\n', "role", 4),
        (f'[[identity]]\nname = "ana"\ntoken_sha256 = "{ANA}"\nrole = "god"\n', "role", 4),
        (f'[[identities]]\nname = "ana"\ntoken_sha256 = "{ANA}"\n', "identities", 1),
        (f'[[identity]]\nname = ["ana"]\ntoken_sha256 = "{ANA}"\n', "name", 2),
    ],
)
def test_a_key_the_tokens_file_does_not_have_stops_it_naming_key_and_line(
    tmp_path: Path, text: str, key: str, line: int
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(repr(key))) as refused:
        TokenAuth.from_file(path)
    message = str(refused.value)
    assert repr(key) in message and f"(line {line})" in message, message
    assert str(path) in message


def test_a_misspelt_scope_never_becomes_every_thread(tmp_path: Path) -> None:
    entry = {"name": "ops", "role": "approver", "token_sha256": ANA, "thread": ["ops-"]}
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"identity": [entry]}, indent=2))
    with pytest.raises(ValueError, match=r"unknown key 'thread' \(did you mean 'threads'\?\)"):
        TokenAuth.from_file(path)
    with pytest.raises(ValueError, match=r"identity #1 \(line 7\)"):
        TokenAuth.from_file(path)
    with pytest.raises(ValueError, match="unknown key 'thread'"):
        TokenAuth.from_config([entry])
    # Spelt right, the scope holds.
    entry["threads"] = entry.pop("thread")
    path.write_text(json.dumps({"identity": [entry]}))
    ops = TokenAuth.from_file(path).authenticate("Bearer ana-token")
    assert ops is not None and ops.threads == ("ops-",)
    assert not ops.sees_thread("billing-1")


def test_names_are_one_identity_however_they_are_typed() -> None:
    with pytest.raises(ValueError, match="case-folded"):
        TokenAuth({hash_token("a"): Identity(name="Ana"), hash_token("b"): Identity(name="ana")})
    with pytest.raises(ValueError, match="white space"):
        TokenAuth({hash_token("a"): Identity(name="ana ")})
