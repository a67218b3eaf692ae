"""An SMTP server on loopback for the email notification tests (aiosmtpd, in its own thread).

`Mailbox` accepts mail and keeps each message it gets; told to, it refuses the first senders
(as a greylisting server does) or some recipients, offers STARTTLS and requires a login.
`tls_pair` makes a certificate for 127.0.0.1 and the contexts of both ends.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

__all__ = ["Mail", "Mailbox", "tls_pair"]


@dataclass(frozen=True, kw_only=True)
class Mail:
    """One message the server accepted."""

    mail_from: str
    """The envelope sender."""
    rcpt_tos: list[str]
    """The envelope recipients the server accepted."""
    message: EmailMessage
    """The message, parsed."""
    login: str | None
    """Who logged in to send it, if anyone."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Mailbox:
    """An SMTP server on loopback; use it as a context manager.

    Args:
        refuse_senders: Replies to the first MAIL FROM commands, in order (e.g. a 451).
        unknown: Recipients refused with ``550 5.1.1``.
        logins: Accepted user names and passwords; when given, mail needs a login.
        tls: The server's TLS context; when given, STARTTLS is required (and so before a
            login).
    """

    def __init__(
        self,
        *,
        refuse_senders: Collection[str] = (),
        unknown: Collection[str] = (),
        logins: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.mail: list[Mail] = []
        """Every message accepted, in order."""
        self.sessions = 0
        """How many MAIL FROM commands arrived."""
        self.host = "127.0.0.1"
        self.port = _free_port()
        self._refusals = deque(refuse_senders)
        self._unknown = set(unknown)
        self._logins = logins
        extra: dict[str, Any] = {}
        if logins is not None:
            extra.update(authenticator=self._authenticate, auth_required=True)
        if tls is not None:
            extra.update(tls_context=tls, require_starttls=True)
        self._controller = Controller(self, hostname=self.host, port=self.port, **extra)

    def __enter__(self) -> Mailbox:
        self._controller.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._controller.stop()

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert self._logins is not None
        if isinstance(data, LoginPassword):
            user, password = data.login.decode(), data.password.decode()
            if self._logins.get(user) == password:
                return AuthResult(success=True, auth_data=user)
        return AuthResult(success=False, handled=False)

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        self.sessions += 1
        if self._refusals:
            return self._refusals.popleft()
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if address in self._unknown:
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        message = message_from_bytes(content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        login = session.auth_data if session.authenticated else None
        self.mail.append(
            Mail(
                mail_from=envelope.mail_from or "",
                rcpt_tos=list(envelope.rcpt_tos),
                message=message,
                login=login if isinstance(login, str) else None,
            )
        )
        return "250 Message accepted for delivery"


def tls_pair(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh certificate for 127.0.0.1, and a client one that trusts it."""
    # Imported here: cryptography comes with the dev extra's mcp, and a test without it skips.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "interlock test mailbox")])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (folder / "cert.pem").write_bytes(cert_pem)
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client
