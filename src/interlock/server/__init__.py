"""The approvers' side: an HTTP API, its event stream, a web inbox and notifications.

Needs the ``server`` extra (``pip install 'interlock[server]'``). A sketch (not run; the
approvers' how-to guide runs a server)::

    from interlock.server import Identity, TokenAuth, create_app, hash_token

    auth = TokenAuth({hash_token("s3cret"): Identity(name="ana", role="approver")})
    api = create_app(app, auth=auth)      # an ASGI app: uvicorn, or Mount it in yours

Who may call is decided by an authenticator: `TokenAuth` (a tokens file, read once) or
`StoreAuth` (the principals and tokens kept in a store, managed while the server runs).
People may also sign in to the web inbox with single sign-on (``create_app(sso=OIDCConfig(...))``,
the ``sso`` extra) or through a reverse proxy that signs them in
(``create_app(proxy=TrustedProxy(...))``); tokens keep working beside both.

Run alone with ``interlock serve --app module:app --tokens tokens.toml``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._public import publish
from ._access import GroupAccess
from ._app import create_app
from ._auth import ROLES, Identity, Role, TokenAuth, hash_token, new_token
from ._events import EVENT_TYPES, EventType, ServerEvent
from ._links import EmailLinks
from ._notify import (
    INTERRUPT_EVENTS,
    Channel,
    DeliveryLog,
    DeliveryRecord,
    Email,
    Notifier,
    RetryPolicy,
    SignatureError,
    Webhook,
    sign,
    verify_signature,
)
from ._oidc import OIDCConfig
from ._proxy import TrustedProxy
from ._state import Authenticator
from ._store_auth import (
    ImportReport,
    IssuedToken,
    StoreAuth,
    import_tokens,
    issue_token,
    parse_expiry,
)

__all__ = [
    "EVENT_TYPES",
    "INTERRUPT_EVENTS",
    "ROLES",
    "Authenticator",
    "Channel",
    "DeliveryLog",
    "DeliveryRecord",
    "Email",
    "EmailLinks",
    "EventType",
    "GroupAccess",
    "Identity",
    "ImportReport",
    "IssuedToken",
    "Notifier",
    "OIDCConfig",
    "RetryPolicy",
    "Role",
    "ServerEvent",
    "SignatureError",
    "Slack",
    "SlackConfigError",
    "StoreAuth",
    "TokenAuth",
    "TrustedProxy",
    "Webhook",
    "create_app",
    "hash_token",
    "import_tokens",
    "issue_token",
    "new_token",
    "parse_expiry",
    "sign",
    "verify_signature",
]

publish(__name__, globals(), __all__)

if TYPE_CHECKING:
    # Imported when first named (below): the slack extra's libraries load only then.
    from ._slack import Slack, SlackConfigError

_SLACK = ("Slack", "SlackConfigError")


def __getattr__(name: str) -> Any:
    # The Slack channel is the slack extra's (slack_sdk, aiohttp): imported when first named.
    if name in _SLACK:
        from . import _slack

        found = {n: getattr(_slack, n) for n in _SLACK}
        publish(__name__, found, _SLACK)
        globals().update(found)
        return found[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
