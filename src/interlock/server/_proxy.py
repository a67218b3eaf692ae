"""A trusted reverse proxy that signs people in (oauth2-proxy or similar) and names them in headers.

The proxy authenticates the person and passes their name (``X-Forwarded-User``) and groups
(``X-Forwarded-Groups``, comma-separated) on each request. Anyone can send those headers, so
they are believed only from the configured proxy addresses: the address checked is the TCP
peer as the ASGI server reports it (``scope["client"]``). From any other address the headers
are ignored (and the first request from each such address is logged).

The ASGI server must report the real peer. ``interlock serve`` runs uvicorn with
``proxy_headers=False`` for that. uvicorn by default, when it trusts ``X-Forwarded-For`` from
an address (its ``forwarded_allow_ips``, 127.0.0.1 by default), reports a client named in that
header instead: a proxy on 127.0.0.1 that sends ``X-Forwarded-For`` is then not recognised
(serve the app yourself with ``proxy_headers=False``, ``--no-proxy-headers``, or put the proxy
on another address), and anyone who can connect from 127.0.0.1 could name a trusted proxy in
the header.
So a peer that is named in the request's own ``X-Forwarded-For`` or ``Forwarded`` header is
not believed: the ASGI server may have taken it from there, and a proxy does not name itself
as the client it forwards for.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from starlette.requests import Request

from ._access import AccessRules, GroupAccess
from ._auth import Identity, Role

__all__ = ["TrustedProxy"]

log = logging.getLogger("interlock.server")

_HEADER: Final = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_RESERVED: Final = frozenset({"authorization", "cookie", "host", "content-type", "content-length"})
_WARNED_MAX: Final = 1000

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A reverse proxy whose headers say who is calling (``create_app(proxy=...)``).

    For example, oauth2-proxy on 10.0.0.5 (a sketch, not run)::

        TrustedProxy(addresses=("10.0.0.5",), roles={"approvers": "approver"},
                     sign_out_url="/oauth2/sign_out")

    Or from the ``[proxy]`` table of ``interlock serve --sso`` (`from_config`).
    """

    addresses: tuple[str, ...]
    """The proxy's addresses or networks (``10.0.0.5``, ``10.0.0.0/24``, ``::1``); a request
    from any other peer has its identity headers ignored."""
    user_header: str = "X-Forwarded-User"
    """The header that names the person."""
    groups_header: str | None = "X-Forwarded-Groups"
    """The header that lists their groups, comma-separated (None: no groups)."""
    role_header: str | None = None
    """A header that names their role (comma-separated roles: the highest counts), instead
    of ``roles`` by group."""
    roles: dict[str, Role | GroupAccess] = msgspec.field(default_factory=dict)
    """What each group may do: ``{group: role}`` or ``{group: GroupAccess(...)}``."""
    default_role: Role | None = None
    """The role of a person in no listed group (or with no role header); None refuses them."""
    sign_out_url: str | None = None
    """Where the inbox's "Log out" sends the browser (the proxy's sign-out, e.g.
    ``/oauth2/sign_out``); without it the inbox offers no sign-out."""

    def __post_init__(self) -> None:
        if not isinstance(self.addresses, tuple) or not self.addresses:
            raise ValueError("addresses must name at least one proxy address")
        self.networks()
        for name in ("user_header", "groups_header", "role_header"):
            value = getattr(self, name)
            if value is None and name != "user_header":
                continue
            if not isinstance(value, str) or not _HEADER.match(value):
                raise ValueError(f"{name} must be a header name, not {value!r}")
            if value.lower() in _RESERVED:
                raise ValueError(f"{name} cannot be {value!r}: that header means something else")
        if self.sign_out_url is not None and (
            not isinstance(self.sign_out_url, str) or not self.sign_out_url.isprintable()
        ):
            raise ValueError("sign_out_url must be a URL or a path")
        self.access()

    def networks(self) -> tuple[Network, ...]:
        """The proxy addresses as networks."""
        out: list[Network] = []
        for address in self.addresses:
            try:
                out.append(ipaddress.ip_network(address, strict=False))
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"proxy address {address!r} is not an IP address or network: {exc}"
                ) from exc
        return tuple(out)

    def access(self) -> AccessRules:
        """The rules that turn the headers' name, groups and roles into an `Identity`."""
        return AccessRules(
            self.roles, default_role=self.default_role, by_role=self.role_header is not None
        )

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> TrustedProxy:
        """A configuration from plain data (a TOML table); unknown or missing keys are refused."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(f"the trusted proxy configuration is not valid: {exc}") from exc


class ProxyHeaders:
    """Reads the identity a trusted proxy sends; ignores the headers from anyone else."""

    def __init__(self, config: TrustedProxy) -> None:
        self.config = config
        self._networks = config.networks()
        self._access = config.access()
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"<ProxyHeaders {self.config.user_header} from {list(self.config.addresses)}>"

    def trusts(self, peer: str | None) -> bool:
        """Whether ``peer`` (an IP address) is one of the proxy's."""
        address = _address(peer)
        if address is None:
            return False
        return any(address in network for network in self._networks)

    def identity(self, request: Request) -> Identity | None:
        """The identity the proxy names, or None (no header, or not from the proxy).

        Raises:
            NoAccess: the proxy names someone who may not use this server.
        """
        names = request.headers.getlist(self.config.user_header)
        if not names:
            return None
        peer = request.client.host if request.client is not None else None
        if not self.trusts(peer) or _forwarded_for(request, peer):
            self._warn(peer)
            return None
        if len(names) > 1:
            return None  # two names for one request: believe neither
        groups = self._listed(request, self.config.groups_header)
        roles = self._listed(request, self.config.role_header)
        return self._access.identity(names[0], groups, roles)

    @staticmethod
    def _listed(request: Request, header: str | None) -> list[str] | None:
        if header is None:
            return None
        values = request.headers.getlist(header)
        return [g.strip() for v in values for g in v.split(",") if g.strip()]

    def _warn(self, peer: str | None) -> None:
        if str(peer) in self._warned or len(self._warned) >= _WARNED_MAX:
            return
        self._warned.add(str(peer))
        log.warning(
            "a request from %s carries %s, and %s is not a trusted proxy (%s): the header is "
            "ignored. If the proxy is at a trusted address and the server rewrote the peer from "
            "X-Forwarded-For, serve without that rewrite (uvicorn: --no-proxy-headers)",
            peer,
            self.config.user_header,
            peer,
            ", ".join(self.config.addresses),
        )


_FOR: Final = re.compile(r"(?i)(?:^|[;,\s])for=\"?([^\";,]+)")


def _forwarded_for(request: Request, peer: str | None) -> bool:
    """Whether ``peer`` is one of the clients the request's forwarding headers name."""
    named: list[str] = []
    for value in request.headers.getlist("x-forwarded-for"):
        named += value.split(",")
    for value in request.headers.getlist("forwarded"):
        named += _FOR.findall(value)
    return any(_address(n) == _address(peer) for n in named) if named and peer else False


def _address(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address from ``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80`` or ``::1`` (None: not one)."""
    if text is None:
        return None
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
