"""Actor addresses: ``KIND/NAME`` (docs/protocol.md, "Addresses")."""

from __future__ import annotations

import os
import re
import time

from ..errors import BadAddress

__all__ = ["KIND_PATTERN", "NAME_PATTERN", "Address", "new_name", "parse_address"]

KIND_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Address(str):
    """An actor's address. It is a ``str`` so it round-trips through ``str()``
    and JSON; ``kind`` and ``name`` are its two halves. ``existed`` is set by
    ``spawn`` to say whether the actor was already there."""

    __slots__ = ("existed",)
    existed: bool

    def __new__(cls, value: str, *, existed: bool = False) -> Address:
        parse_address(value)
        self = super().__new__(cls, value)
        self.existed = existed
        return self

    @property
    def kind(self) -> str:
        return self.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.split("/", 1)[1]


def parse_address(address: object) -> tuple[str, str]:
    """Split ``KIND/NAME``; raises `BadAddress` naming what was wrong."""
    if not isinstance(address, str):
        raise BadAddress(f"an address must be a string 'KIND/NAME', got {address!r}")
    kind, sep, name = address.partition("/")
    if not sep:
        raise BadAddress(
            f"address {address!r} has no '/': write it as KIND/NAME, e.g. 'session/s1'"
        )
    if not KIND_PATTERN.fullmatch(kind):
        raise BadAddress(
            f"address {address!r} has kind {kind!r}, which does not match {KIND_PATTERN.pattern}"
        )
    if not NAME_PATTERN.fullmatch(name):
        raise BadAddress(
            f"address {address!r} has name {name!r}, which does not match {NAME_PATTERN.pattern}"
        )
    return kind, name


def new_name() -> str:
    """A fresh, time-ordered name (ULID layout: 48 bits of ms, 80 random bits)."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))
