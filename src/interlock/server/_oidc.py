"""Single sign-on with an OpenID provider: how it is configured, and how it fails.

The flow itself (Authlib, which the ``sso`` extra installs) is in ``_oidc_client.py``; this
module needs nothing beyond the server extra, so the server imports without the sso extra.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

from ._access import AccessRules, GroupAccess
from ._auth import Role

__all__ = ["OIDCConfig", "ProviderUnavailable", "SignInRefused", "redirect_for"]


class SignInRefused(Exception):
    """Raised when a sign-in is refused: what the provider sent does not prove who it is."""


class ProviderUnavailable(Exception):
    """Raised when the OpenID provider cannot be reached or answers nonsense."""


class OIDCConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the server signs people in with an OpenID provider (``create_app(sso=...)``).

    For example (a sketch, not run)::

        OIDCConfig(
            issuer="https://login.example.com/realms/staff",
            client_id="interlock",
            client_secret=os.environ["INTERLOCK_OIDC_CLIENT_SECRET"],
            redirect_url="https://approvals.example.com/auth/callback",
            roles={"payments-approvers": "approver", "ops": GroupAccess(role="approver",
                   threads=("ops-",))},
        )

    Or from a mapping, such as the ``[oidc]`` table of ``interlock serve --sso`` (`from_config`);
    a key it does not know is refused, naming it.
    """

    issuer: str
    """The provider's issuer URL, exactly as its discovery document states it (https; http
    only on a loopback address)."""
    client_id: str
    """This server's client id at the provider."""
    client_secret: str
    """This server's client secret at the provider."""
    redirect_url: str | None = None
    """The callback URL registered at the provider, ending in ``/auth/callback``; without it,
    ``create_app``'s ``public_url`` followed by ``/auth/callback``."""
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    """The scopes asked for; ``openid`` must be one. Add the one that brings the groups claim
    if the provider needs it (often ``groups``)."""
    name_claim: str = "sub"
    """The claim that names the person: their name as an actor in decisions and audit logs.
    ``sub`` is the one the standard makes unique; ``email`` or ``preferred_username`` read
    better where the provider keeps them unique and unchangeable."""
    groups_claim: str = "groups"
    """The claim that lists the person's groups (a list of names, or one name)."""
    role_claim: str | None = None
    """A claim that names the person's role (``viewer``, ``approver``, ``admin``, or a list
    holding them: the highest counts), instead of ``roles`` by group."""
    roles: dict[str, Role | GroupAccess] = msgspec.field(default_factory=dict)
    """What each group may do: ``{group: role}`` or ``{group: GroupAccess(...)}``."""
    default_role: Role | None = None
    """The role of a person in no listed group (or with no role claim); None refuses them."""
    session_seconds: float = 8 * 3600.0
    """How long a sign-in lasts before the person signs in again."""
    leeway: int = 60
    """Seconds of clock difference with the provider allowed when checking token times."""
    timeout: float = 10.0
    """Seconds to wait for the provider's answers."""

    def __post_init__(self) -> None:
        for name in ("issuer", "client_id", "client_secret", "name_claim", "groups_claim"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or not value.isprintable():
                raise ValueError(f"{name} must be a non-empty printable string")
        issuer = urlsplit(self.issuer)
        if issuer.query or issuer.fragment or not issuer.hostname:
            raise ValueError(f"issuer {self.issuer!r} must be a URL without query or fragment")
        if issuer.scheme != "https" and not (
            issuer.scheme == "http" and _loopback(issuer.hostname)
        ):
            raise ValueError(
                f"issuer {self.issuer!r} must be https (http is taken only on a loopback address)"
            )
        if self.redirect_url is not None:
            _check_redirect(self.redirect_url)
        if not isinstance(self.scopes, tuple) or "openid" not in self.scopes:
            raise ValueError(f"scopes must include 'openid', not {self.scopes!r}")
        if not all(isinstance(s, str) and s and " " not in s for s in self.scopes):
            raise ValueError(f"scopes must be single words, not {self.scopes!r}")
        if self.role_claim is not None and not (
            isinstance(self.role_claim, str) and self.role_claim
        ):
            raise ValueError("role_claim must be a claim name or None")
        for name, low in (("session_seconds", 60), ("leeway", 0), ("timeout", 0.1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
                raise ValueError(f"{name} must be a number of at least {low}, not {value!r}")
        self.access()  # the roles and default role, checked

    def __repr__(self) -> str:
        return (
            f"OIDCConfig(issuer={self.issuer!r}, client_id={self.client_id!r}, "
            f"client_secret='***', redirect_url={self.redirect_url!r})"
        )

    def access(self) -> AccessRules:
        """The rules that turn a person's claims into an `Identity`."""
        return AccessRules(
            self.roles, default_role=self.default_role, by_role=self.role_claim is not None
        )

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> OIDCConfig:
        """A configuration from plain data (a TOML table); unknown or missing keys are refused."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(f"the single sign-on configuration is not valid: {exc}") from exc


def redirect_for(config: OIDCConfig, public_url: str | None) -> str:
    """The callback URL: the configured one, else ``public_url`` + ``/auth/callback``."""
    if config.redirect_url is not None:
        return config.redirect_url
    if public_url is None:
        raise ValueError(
            "single sign-on needs the URL the provider sends people back to: give "
            "OIDCConfig(redirect_url='https://.../auth/callback') or create_app(public_url=...)"
        )
    url = public_url.rstrip("/") + "/auth/callback"
    _check_redirect(url)
    return url


def _check_redirect(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment:
        raise ValueError(f"redirect URL {url!r} must be an absolute http(s) URL")
    if not parts.path.endswith("/auth/callback"):
        raise ValueError(
            f"redirect URL {url!r} must end in /auth/callback, where the server takes it"
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
