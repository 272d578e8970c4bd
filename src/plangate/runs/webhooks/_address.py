"""Where a webhook may be sent: an ``http(s)`` URL whose host resolves to public addresses only.

For: ``checked_url`` (an endpoint's URL, refused at registration when malformed or when its host resolves to
a private, loopback, link-local or otherwise non-public address) and ``target`` (the address an attempt
connects to, resolved again at each attempt and checked the same way, so a name that resolved to a public
address at registration and to ``127.0.0.1`` later — DNS rebinding — is refused then too). The operator may
allow private addresses (``[webhooks] allow_private = true``: receivers on the operator's own network). Not
for: sending (``deliver.py``).

The attempt connects to the very address checked (the URL's host replaced by it, the name kept in the
``Host`` header and the TLS server name), so nothing resolves the name a second time between the check and
the connection.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

from plangate.errors import ConfigError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL = 2048


@dataclass(frozen=True, slots=True)
class Target:
    """Where one attempt connects.

    Attributes:
        url: the endpoint's URL with its host replaced by the checked address.
        host: the ``Host`` header (the name, with the port when the URL gave one).
        server_name: the name TLS checks the certificate against (https), else None.
    """

    url: str
    host: str
    server_name: str | None


def checked_url(url: str, *, allow_private: bool) -> str:
    """``url`` if an endpoint may have it: ``http(s)``, a host, no credentials, and (unless
    ``allow_private``) a host that resolves to public addresses only.

    Raises:
        ConfigError: it may not, and the message says why.
    """
    parts = _parts(url)
    addresses = _resolve(parts)
    if not allow_private:
        _require_public(parts, addresses)
    return url.strip()


def target(url: str, *, allow_private: bool) -> Target:
    """Where an attempt to ``url`` connects: its host resolved now and checked.

    Raises:
        ConfigError: the URL is unusable, its host does not resolve, or it resolves to a non-public address
            that the operator did not allow.
    """
    parts = _parts(url)
    addresses = _resolve(parts)
    if not allow_private:
        _require_public(parts, addresses)
    chosen = addresses[0]
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    host = parts.netloc.rpartition("@")[2]
    return Target(
        url=urlunsplit(parts._replace(netloc=netloc)),
        host=host,
        server_name=parts.hostname if parts.scheme == "https" else None,
    )


def public(address: Address) -> bool:
    """Whether ``address`` is reachable on the public internet: not private, loopback, link-local, shared,
    reserved, multicast or unspecified (an IPv4 address inside IPv6 judged as itself)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _parts(url: str) -> SplitResult:
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("url: expected an http:// or https:// URL; found an empty one")
    if len(url) > MAX_URL:
        raise ConfigError(f"url: expected at most {MAX_URL} characters; found {len(url)}")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise ConfigError(f"url: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"url: expected an http:// or https:// URL; found scheme {parts.scheme!r}")
    if not parts.hostname:
        raise ConfigError("url: expected a host name or address after '//'")
    if parts.username is not None or parts.password is not None:
        raise ConfigError("url: credentials in the URL are refused; the signature authenticates deliveries")
    return parts


def _resolve(parts: SplitResult) -> list[Address]:
    host = parts.hostname or ""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"url: the host {host!r} does not resolve ({exc})") from None
    addresses: list[Address] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ConfigError(f"url: the host {host!r} resolves to no address")
    return addresses


def _require_public(parts: SplitResult, addresses: list[Address]) -> None:
    refused = [address for address in addresses if not public(address)]
    if refused:
        shown = ", ".join(str(address) for address in refused)
        raise ConfigError(
            f"url: the host {parts.hostname!r} is at {shown}, a private, loopback or link-local address: "
            "refused unless the operator allows it ([webhooks] allow_private = true)"
        )


__all__ = ["Target", "checked_url", "public", "target"]
