"""Envelopes, addresses, acks, events and dead letters: what a mailbox holds and says,
and the limits (`MAX_DEPTH`, `MAX_TYPE`, `MAX_KEY`) a message meets at the door."""

from ._address import KIND_PATTERN as KIND_PATTERN
from ._address import NAME_PATTERN as NAME_PATTERN
from ._address import Address as Address
from ._address import new_name as new_name
from ._address import parse_address as parse_address
from ._envelope import Ack as Ack
from ._envelope import DeadLetter as DeadLetter
from ._envelope import Event as Event
from ._envelope import Message as Message
from ._envelope import encode_body as encode_body
from ._envelope import format_at as format_at
from ._limits import MAX_DEPTH as MAX_DEPTH
from ._limits import MAX_KEY as MAX_KEY
from ._limits import MAX_TYPE as MAX_TYPE
from ._limits import check_key as check_key
from ._limits import check_type as check_type

__all__ = [
    "KIND_PATTERN",
    "MAX_DEPTH",
    "MAX_KEY",
    "MAX_TYPE",
    "NAME_PATTERN",
    "Ack",
    "Address",
    "DeadLetter",
    "Event",
    "Message",
    "check_key",
    "check_type",
    "encode_body",
    "format_at",
    "new_name",
    "parse_address",
]
