"""`GatewayConfig`: every limit and timing of the gateway, checked when it is made.

The limits exist so that no client, however slow or hostile, can grow the
server's memory or stall other clients: each one bounds a queue, a buffer or
a wait. Every connection presents a token, loopback included: the one
given here, else the data directory's own (``<data>/token``, see
`ensure_operator_token`), or a scoped client token. Binding anything but
loopback also requires the token to be chosen explicitly, which is checked
here, before a socket is opened.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
from attrs import validators as v

from .._local import is_loopback

__all__ = ["GatewayConfig", "is_loopback"]


def _positive_int(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name!r} must be a positive integer, got {value!r}")


def _positive(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{attribute.name!r} must be a positive number, got {value!r}")


def _positive_or_none(
    instance: object, attribute: attrs.Attribute[float | None], value: object
) -> None:
    if value is not None:
        _positive(instance, attribute, value)  # type: ignore[arg-type]


def _positive_int_or_none(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive_int(instance, attribute, value)


def _origins(value: Iterable[str]) -> tuple[str, ...]:
    """``allowed_origins`` as a tuple (typed, so that ``attrs.evolve`` checks its argument)."""
    return tuple(value)


def _check_token(
    instance: GatewayConfig, attribute: attrs.Attribute[str | None], value: object
) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"'token' must be a non-empty string or None, got {value!r}")


@attrs.frozen
class GatewayConfig:
    """How the gateway listens and what it allows each connection.

    Attributes:
        host: interface to bind; loopback by default. Any other needs ``token``.
        port: TCP port; 0 picks a free one (the real one is in the URL).
        token: the operator token clients present (header or ``hello``); None
            means the data directory's ``token`` file, made on first start.
            Scoped client tokens (``tokens.json`` there) are accepted either way.
        allowed_origins: browser origins allowed besides the server's own
            ``http://127.0.0.1:PORT`` and ``http://localhost:PORT``;
            ``callboard serve`` adds its web console's two (``callboard.console``).
        max_frame: bytes in one incoming frame; larger ones get ``too_large``.
            A frame over four times this is not buffered at all: the
            connection is closed with 1009.
        max_connections: open websocket connections; more are refused (503).
        max_subscriptions: open subscriptions per connection (``rate_limited``).
        max_inflight: requests of one connection handled at once; past it the
            connection's frames are not read until one finishes (backpressure).
        handshake_timeout: seconds for the HTTP upgrade, and again for ``hello``.
        ping_interval: seconds of silence from a client before it is pinged.
        idle_timeout: seconds a ping may wait for its pong before the
            connection is closed (1011).
        send_timeout: seconds outgoing frames may wait for the client to
            take any of their bytes; a client that takes no data for that
            long is disconnected.
        write_batch: queued frames written together, with one socket write
            (at most 64 K characters of them); 1 writes every frame on its
            own. Batching spares a system call per frame when events come
            faster than one at a time.
        close_timeout: seconds a closing handshake may take.
        shutdown_grace: seconds in-flight requests get to finish when the
            server stops, before connections are closed with 1001.
        send_queue: outgoing frames queued per connection (replies, events,
            errors). Events may use all but the reserve; the reserve
            (``max_subscriptions + 2`` frames) keeps room for ``lagged`` and
            error frames, so a lagging subscriber is always told where to
            resume. One commit's events reach a subscriber at once, so this
            is also the largest burst a subscriber takes without lagging.
        send_queue_bytes: characters of events and replies queued per
            connection; with ``send_queue`` it bounds a connection's memory
            when events are big. A replay (``subscribe`` with ``after``)
            waits while the queue is over it and reads no page from the
            store meanwhile: it goes at the client's pace instead of lagging
            (pages are ``RuntimeConfig.replay_page`` and ``replay_page_bytes``).
        subscriber_buffer: events buffered per subscription in the runtime's
            hub before the connection takes them; past it the subscription lags.
        rate_limit: requests per second allowed per connection (token bucket),
            or None for no limit; excess requests get ``rate_limited``.
        rate_burst: requests a connection may send at once above ``rate_limit``.
        auth_burst: failed authentications one peer address may make at once;
            past them its attempts are refused unchecked (``rate_limited``).
        auth_rate: failed authentications per second a peer regains after that.
        activation_quota: new actors (a first message to a virtual actor, or
            a spawn) one token may create per minute, or None for no limit;
            more get ``rate_limited``.
        list_limit: actors in one ``list`` reply (a request's ``limit`` is
            capped to it); a longer list ends with ``next``, the ``after`` of
            the next page.
    """

    host: str = attrs.field(default="127.0.0.1", validator=v.instance_of(str))
    port: int = attrs.field(default=7341, validator=[v.instance_of(int), v.ge(0), v.le(65535)])
    token: str | None = attrs.field(default=None, validator=_check_token)
    allowed_origins: tuple[str, ...] = attrs.field(
        default=(),
        converter=_origins,
        validator=v.deep_iterable(v.instance_of(str), v.instance_of(tuple)),
    )
    max_frame: int = attrs.field(default=1024 * 1024, validator=_positive_int)
    max_connections: int = attrs.field(default=1024, validator=_positive_int)
    max_subscriptions: int = attrs.field(default=64, validator=_positive_int)
    max_inflight: int = attrs.field(default=64, validator=_positive_int)
    handshake_timeout: float = attrs.field(default=10.0, validator=_positive)
    ping_interval: float = attrs.field(default=20.0, validator=_positive)
    idle_timeout: float = attrs.field(default=20.0, validator=_positive)
    send_timeout: float = attrs.field(default=30.0, validator=_positive)
    close_timeout: float = attrs.field(default=2.0, validator=_positive)
    shutdown_grace: float = attrs.field(default=5.0, validator=v.instance_of((int, float)))
    write_batch: int = attrs.field(default=64, validator=_positive_int)
    send_queue: int = attrs.field(default=1024, validator=_positive_int)
    send_queue_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive_int)
    subscriber_buffer: int = attrs.field(default=1024, validator=_positive_int)
    rate_limit: float | None = attrs.field(default=None, validator=_positive_or_none)
    rate_burst: int = attrs.field(default=100, validator=_positive_int)
    list_limit: int = attrs.field(default=10_000, validator=_positive_int)
    auth_burst: int = attrs.field(default=10, validator=_positive_int)
    auth_rate: float = attrs.field(default=0.1, validator=_positive)
    activation_quota: int | None = attrs.field(default=1000, validator=_positive_int_or_none)

    def __attrs_post_init__(self) -> None:
        if self.token is None and not is_loopback(self.host):
            raise ValueError(
                f"binding {self.host or 'every interface'!r} exposes the gateway beyond this "
                "machine, so its token must be chosen: pass --token TOKEN or set CALLBOARD_TOKEN "
                "(or --token-file FILE; GatewayConfig(token=...) when embedding), or bind "
                "127.0.0.1"
            )
        if self.send_queue <= self.send_reserve:
            raise ValueError(
                f"send_queue ({self.send_queue}) must be larger than its reserve for lagged "
                f"and error frames, max_subscriptions + 2 ({self.send_reserve})"
            )
        if self.shutdown_grace < 0:
            raise ValueError(f"shutdown_grace must be >= 0, got {self.shutdown_grace!r}")

    @property
    def send_reserve(self) -> int:
        """Frames of ``send_queue`` kept for ``lagged`` and error frames only:
        one per subscription, so every lagging subscription fits, plus two."""
        return self.max_subscriptions + 2

    @property
    def transport_max_frame(self) -> int:
        """The size past which the websocket layer drops a frame and closes (1009)."""
        return 4 * self.max_frame
