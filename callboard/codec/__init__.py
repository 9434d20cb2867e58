"""The one on-disk and wire format: a cattrs converter over orjson, and the
checks JSON from outside is held to. The bottom layer above `errors`: the
store, the mailbox, the gateway and the client all speak through it."""

from ._codec import JSONRefused as JSONRefused
from ._codec import check_loaded as check_loaded
from ._codec import converter as converter
from ._codec import dumps as dumps
from ._codec import dumps_within as dumps_within
from ._codec import loads as loads
from ._codec import structure_error as structure_error

__all__ = [
    "JSONRefused",
    "check_loaded",
    "converter",
    "dumps",
    "dumps_within",
    "loads",
    "structure_error",
]
