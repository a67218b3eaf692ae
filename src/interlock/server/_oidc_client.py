"""The OpenID provider as the server talks to it: the authorization code flow with PKCE.

The server is a confidential client of the provider (it has a client secret) and uses the
authorization code flow with PKCE (RFC 7636), through Authlib's client: the browser is sent to
the provider with a ``state``, a ``nonce`` and a code challenge; the provider sends it back to
``/auth/callback`` with a code, which the server exchanges, with the code's verifier, for
tokens. The ID token is checked here (Authlib's `CodeIDToken` over joserfc): signed by a key of
the provider's key set with a public-key algorithm, issued by the configured issuer to this
client, not expired, and carrying the nonce of this sign-in. A claim the ID token lacks (a
provider may keep groups for its userinfo endpoint) is read from the userinfo endpoint with the
access token, which must describe the same subject.

Needs the ``sso`` extra (Authlib); the server imports this module only when single sign-on is
configured.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import httpx2
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

from ._access import NoAccess
from ._auth import Identity
from ._oidc import OIDCConfig, ProviderUnavailable, SignInRefused

__all__ = ["OIDCProvider"]

log = logging.getLogger("interlock.server")

_ASYMMETRIC: Final = ("RS", "PS", "ES", "Ed")
"""ID token algorithms taken: public-key signatures only (an HS* token is signed with the
client secret, which this server holds too, so it proves nothing about who made it)."""


class OIDCProvider:
    """The OpenID provider as this server talks to it: one client, its discovery and keys cached.

    Entered by the server's lifespan (it holds an HTTP client); `sign_in_url` and `identity`
    may run concurrently.
    """

    def __init__(self, config: OIDCConfig, redirect_url: str) -> None:
        self.config = config
        self.redirect_url = redirect_url
        self.secure = redirect_url.startswith("https://")
        self._access = config.access()
        self._client: AsyncOAuth2Client | None = None
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None

    def __repr__(self) -> str:
        return f"<OIDCProvider {self.config.issuer} client {self.config.client_id}>"

    async def __aenter__(self) -> OIDCProvider:
        self._client = AsyncOAuth2Client(
            client_id=self.config.client_id,
            client_secret=self.config.client_secret,
            scope=" ".join(self.config.scopes),
            redirect_uri=self.redirect_url,
            code_challenge_method="S256",
            timeout=self.config.timeout,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def sign_in_url(self, *, state: str, nonce: str, verifier: str) -> str:
        """Where to send the browser: the provider's authorization endpoint, with PKCE."""
        metadata = await self._discover()
        url, _ = self._http().create_authorization_url(
            metadata["authorization_endpoint"], state=state, code_verifier=verifier, nonce=nonce
        )
        return str(url)

    async def identity(self, *, code: str, verifier: str, nonce: str) -> Identity:
        """Exchange ``code`` for tokens, check the ID token, and say who signed in.

        Raises:
            SignInRefused: the provider refused the code, or its ID token does not hold.
            NoAccess: the person proved who they are, and may not use this server.
            ProviderUnavailable: the provider did not answer.
        """
        metadata = await self._discover()
        client = self._http()
        try:
            token = await client.fetch_token(
                metadata["token_endpoint"],
                grant_type="authorization_code",
                code=code,
                code_verifier=verifier,
                redirect_uri=self.redirect_url,
            )
        except OAuthError as exc:
            raise SignInRefused(f"the provider refused the sign-in code ({exc.error})") from exc
        except (httpx2.HTTPError, ValueError) as exc:
            raise ProviderUnavailable(f"the provider's token endpoint failed: {exc}") from exc
        if not isinstance(token.get("id_token"), str) or not isinstance(
            token.get("access_token"), str
        ):
            raise SignInRefused("the provider answered without an ID token")
        claims = await self._checked(token["id_token"], token["access_token"], nonce, metadata)
        wanted = [self.config.name_claim, self.config.groups_claim, self.config.role_claim]
        if any(c is not None and c not in claims for c in wanted) and metadata.get(
            "userinfo_endpoint"
        ):
            claims = {**await self._userinfo(metadata, token["access_token"], claims), **claims}
        name = claims.get(self.config.name_claim)
        if not isinstance(name, str):
            raise NoAccess(f"the provider gave no {self.config.name_claim!r} claim to name you by")
        roles = claims.get(self.config.role_claim) if self.config.role_claim else None
        return self._access.identity(name, claims.get(self.config.groups_claim), roles)

    async def _checked(
        self, id_token: str, access_token: str, nonce: str, metadata: Mapping[str, Any]
    ) -> dict[str, Any]:
        offered = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = [a for a in offered if isinstance(a, str) and a.startswith(_ASYMMETRIC)]
        registry = JWSRegistry(algorithms=algorithms or ["RS256"])
        try:
            try:
                decoded = jwt.decode(id_token, await self._key_set(), registry=registry)
            except InvalidKeyIdError:
                # The provider may have rolled its keys since they were read: read them again.
                decoded = jwt.decode(id_token, await self._key_set(fresh=True), registry=registry)
            claims = CodeIDToken(
                decoded.claims,
                decoded.header,
                {
                    "iss": {"essential": True, "value": self.config.issuer},
                    "aud": {"essential": True, "values": [self.config.client_id]},
                    "sub": {"essential": True},
                },
                {"nonce": nonce, "client_id": self.config.client_id, "access_token": access_token},
            )
            claims.validate(leeway=self.config.leeway)
        except (JoseError, ValueError) as exc:
            raise SignInRefused(f"the ID token was refused: {_reason(exc)}") from exc
        return dict(claims)

    async def _userinfo(
        self, metadata: Mapping[str, Any], access_token: str, claims: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            response = await self._http().request(
                "GET",
                metadata["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"},
                withhold_token=True,
            )
            response.raise_for_status()
            info = response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise ProviderUnavailable(f"the provider's userinfo endpoint failed: {exc}") from exc
        if not isinstance(info, dict) or info.get("sub") != claims["sub"]:
            raise SignInRefused("the provider's userinfo is about someone else than its ID token")
        return info

    async def _discover(self) -> dict[str, Any]:
        if self._metadata is not None:
            return self._metadata
        url = self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            response = await self._http().request("GET", url, withhold_token=True)
            response.raise_for_status()
            metadata = response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise ProviderUnavailable(
                f"the provider's discovery document ({url}) failed: {exc}"
            ) from exc
        if not isinstance(metadata, dict) or metadata.get("issuer") != self.config.issuer:
            found = metadata.get("issuer") if isinstance(metadata, dict) else None
            raise ProviderUnavailable(
                f"the discovery document at {url} names the issuer {found!r}, not "
                f"{self.config.issuer!r}: configure the issuer exactly as the provider states it"
            )
        for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(metadata.get(key), str):
                raise ProviderUnavailable(f"the discovery document at {url} has no {key}")
        self._metadata = metadata
        return metadata

    async def _key_set(self, *, fresh: bool = False) -> KeySet:
        if self._keys is not None and not fresh:
            return self._keys
        metadata = await self._discover()
        try:
            response = await self._http().request("GET", metadata["jwks_uri"], withhold_token=True)
            response.raise_for_status()
            self._keys = KeySet.import_key_set(response.json())
        except (httpx2.HTTPError, ValueError, JoseError) as exc:
            raise ProviderUnavailable(f"the provider's key set failed: {exc}") from exc
        return self._keys

    def _http(self) -> AsyncOAuth2Client:
        if self._client is None:
            raise RuntimeError("the OpenID provider's client is used outside the server's lifespan")
        return self._client


def _reason(exc: Exception) -> str:
    """What joserfc or Authlib found wrong (``bad_signature``, ``The token is expired``...)."""
    return str(getattr(exc, "description", "") or getattr(exc, "error", "") or exc)
