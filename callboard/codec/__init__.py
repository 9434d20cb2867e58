"""The one on-disk and wire format: a cattrs converter over orjson, the checks
JSON from outside is held to, and the strict structuring (`strict_json`) it
goes through. The bottom layer above `errors`: the store, the mailbox, the
gateway and the client all speak through it."""

from ._codec import JSONRefused as JSONRefused
from ._codec import check_loaded as check_loaded
from ._codec import converter as converter
from ._codec import dumps as dumps
from ._codec import dumps_within as dumps_within
from ._codec import kept_copy as kept_copy
from ._codec import loads as loads
from ._codec import structure_error as structure_error
from ._strict import JSONShapeError as JSONShapeError
from ._strict import Refused as Refused
from ._strict import refusals as refusals
from ._strict import shown as shown
from ._strict import strict_json as strict_json
from ._strict import structure_json as structure_json
from ._text import complete_utf8_prefix as complete_utf8_prefix

__all__ = [
    "JSONRefused",
    "JSONShapeError",
    "Refused",
    "check_loaded",
    "complete_utf8_prefix",
    "converter",
    "dumps",
    "dumps_within",
    "kept_copy",
    "loads",
    "refusals",
    "shown",
    "strict_json",
    "structure_error",
    "structure_json",
]
