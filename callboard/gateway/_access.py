"""`Access`: the gateway's one answer to "who is this, and may they do that?".

Shared by every connection of a gateway: the tokens, the limiter of failed
guesses (per peer address, so opening more connections does not buy more
guesses) and the activation quotas (per token, so neither does that).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs

from .._local import is_loopback
from ._grants import FailureLimiter, Grant, TokenBucket
from ._tokens import TokenFile

__all__ = ["Access", "Refused"]

log = logging.getLogger("callboard.gateway")


def _limited_as(peer: str) -> str:
    """The key a peer's failed guesses count under: every loopback address is one
    peer (127.0.0.2 is this machine as much as 127.0.0.1 is)."""
    return "loopback" if is_loopback(peer) else peer


@attrs.frozen
class Refused:
    """Why a hello was not welcomed: the wire code and the sentence for the client."""

    code: str
    message: str


class Access:
    def __init__(
        self,
        tokens: TokenFile,
        failures: FailureLimiter,
        quota: Callable[[], TokenBucket] | None,
    ) -> None:
        self._tokens = tokens
        self._failures = failures
        self._quota = quota
        self._quotas: dict[str, TokenBucket] = {}

    def authenticate(self, peer: str, presented: list[str]) -> Grant | Refused:
        """The grant of the tokens a client presented (header and ``hello``; when
        both are there they must be the same token), or why it is refused."""
        key = _limited_as(peer)
        wait = self._failures.retry_after(key)
        if wait is not None:
            return Refused(
                "rate_limited",
                f"too many failed authentications from {peer}; try again in {wait:.0f} s",
            )
        grant = None
        if presented and all(p == presented[0] for p in presented):
            grant = self._tokens.authenticate(presented[0])
        if grant is not None:
            return grant
        said = self._failures.fail(key)
        if said == "first":
            log.warning("refused %s: a wrong or missing token", peer)
        elif said == "shut_out":
            log.warning(
                "refused %s again: it has used up its failed authentications; its next "
                "attempts are refused unchecked for a while (further refusals are not logged)",
                peer,
            )
        return Refused(
            "unauthorized",
            "wrong or missing token: present it as the header 'Authorization: Bearer TOKEN' "
            "or as 'token' in hello (the operator token is in the data directory's 'token' "
            "file); this connection is closed",
        )

    def still_granted(self, grant: Grant, token: str) -> bool:
        """Whether ``token`` still has ``grant`` (a client token may have been removed
        or changed since the connection said hello; the operator's cannot)."""
        return grant.is_operator or self._tokens.authenticate(token) == grant

    def take_activation(self, grant: Grant) -> bool:
        """Count one new actor against ``grant``'s quota; False when it is used up."""
        if self._quota is None:
            return True
        bucket = self._quotas.get(grant.name)
        if bucket is None:
            bucket = self._quotas[grant.name] = self._quota()
        return bucket.take()
