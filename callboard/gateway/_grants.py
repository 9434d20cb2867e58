"""What an authenticated connection may do: a `Grant`, and the limiter of failed guesses.

A grant has an access level and the actors it reaches:

- ``operator``: everything (the token in ``<data>/token``);
- ``write``: read, and ``send``, ``spawn`` and ``stop`` on its actors;
- ``read``: ``subscribe``, ``inspect`` and ``list`` of its actors, and ``ping``.

Actors are named by patterns: ``KIND/NAME`` (one actor), ``KIND/*`` or
``KIND`` (a whole kind), ``*`` (every actor); ``*`` and ``?`` match as in
shell globs, within the address.
"""

from __future__ import annotations

import fnmatch
from typing import Literal

import attrs
import trio

from ..errors import BadRequest

__all__ = ["Access", "FailureLimiter", "Grant", "TokenBucket", "check_patterns"]

Access = Literal["operator", "write", "read"]


def check_patterns(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """``patterns`` normalised (``KIND`` becomes ``KIND/*``), or BadRequest naming a bad one."""
    if not patterns:
        raise BadRequest("a client token needs at least one actor pattern, e.g. 'session/*'")
    normal = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern or any(c.isspace() for c in pattern):
            raise BadRequest(f"an actor pattern is KIND/NAME, KIND/*, KIND or *, got {pattern!r}")
        normal.append(pattern if "/" in pattern or pattern == "*" else f"{pattern}/*")
    return tuple(normal)


@attrs.frozen
class Grant:
    """Who a connection is (``name``) and what it may touch."""

    name: str
    access: Access
    actors: tuple[str, ...] = ("*",)

    @classmethod
    def operator(cls) -> Grant:
        return cls("operator", "operator")

    @property
    def is_operator(self) -> bool:
        return self.access == "operator"

    def reaches(self, address: str) -> bool:
        return self.is_operator or any(fnmatch.fnmatchcase(address, p) for p in self.actors)

    def may_read(self, address: str) -> bool:
        """``address`` may also be a subscription pattern (``KIND/*``, ``*``): that
        needs a grant of the whole pattern, not one that globs into part of it."""
        if "*" in address:
            return self.is_operator or "*" in self.actors or address in self.actors
        return self.reaches(address)

    def may_write(self, address: str) -> bool:
        return self.access != "read" and self.reaches(address)

    def may_spawn(self, kind: str, name: str | None) -> bool:
        """Whether ``spawn`` of ``kind`` is allowed; with no name, the whole kind
        must be granted (the name the runtime picks could be any)."""
        if self.access == "read":
            return False
        if name is not None:
            return self.reaches(f"{kind}/{name}")
        return self.is_operator or any(p in ("*", f"{kind}/*") for p in self.actors)


class TokenBucket:
    """``rate`` per second on average, ``burst`` at once (requests, activations,
    failed guesses)."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._at = trio.current_time()

    def level(self) -> float:
        """The tokens there are now (refilled for the time since the last look)."""
        now = trio.current_time()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        return self._tokens

    @property
    def full(self) -> bool:
        return self.level() >= self._burst

    def wait(self) -> float:
        """Seconds until there is a token to take (0 if there is one now)."""
        return max(0.0, (1 - self.level()) / self._rate)

    def take(self) -> bool:
        if self.level() < 1:
            return False
        self._tokens -= 1
        return True

    def spend(self) -> None:
        """Take a token whether or not there is one (never below none)."""
        self._tokens = max(0.0, self.level() - 1)


class _Peer:
    __slots__ = ("bucket", "logged")

    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket = bucket
        self.logged = False


class FailureLimiter:
    """Failed authentications per peer: ``burst`` at once, then ``rate`` per second.

    A peer with none left is refused before its token is even looked at, so
    guessing gets nowhere; `fail` says when a burst begins and when the
    peer is shut out, so that the log has a line per burst, not per guess.
    At most ``peers`` peers are remembered; one whose bucket has filled
    again is forgotten first.
    """

    def __init__(self, burst: int, rate: float, *, peers: int = 4096) -> None:
        self._burst = burst
        self._rate = rate
        self._peers = peers
        self._buckets: dict[str, _Peer] = {}

    def _peer(self, peer: str) -> _Peer | None:
        held = self._buckets.get(peer)
        if held is not None and held.bucket.full:
            del self._buckets[peer]  # back to full: the burst is over
            return None
        return held

    def retry_after(self, peer: str) -> float | None:
        """Seconds until ``peer`` may try again, or None if it may now."""
        held = self._peer(peer)
        wait = held.bucket.wait() if held is not None else 0.0
        return wait if wait > 0 else None

    def fail(self, peer: str) -> Literal["first", "shut_out", "quiet"]:
        """Count one failure of ``peer``: the first of a burst, the one that used
        the burst up, or another one (say nothing)."""
        held = self._peer(peer)
        first = held is None
        if held is None:
            if len(self._buckets) >= self._peers:
                self._forget_one()
            held = self._buckets[peer] = _Peer(TokenBucket(self._rate, self._burst))
        held.bucket.spend()
        if held.bucket.level() < 1 and not held.logged:
            held.logged = True
            return "shut_out"
        return "first" if first else "quiet"

    def _forget_one(self) -> None:
        # The fullest bucket is the peer least in need of being held back.
        peer = max(self._buckets, key=lambda p: self._buckets[p].bucket.level())
        del self._buckets[peer]
