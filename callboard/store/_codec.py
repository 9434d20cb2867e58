"""The one on-disk and wire format: a cattrs converter over orjson.

Everything that leaves the process as JSON (snapshots, message bodies, event
data, specs, frames) goes through `converter`, so there is one place where a
type meets its serialized form.
"""

from __future__ import annotations

from typing import Any

import cattrs
import orjson
from cattrs.preconf.orjson import make_converter

__all__ = ["converter", "dumps", "loads", "structure_error"]

converter = make_converter()

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    """Serialize an already-unstructured value; raises TypeError on what JSON cannot hold."""
    return orjson.dumps(value, option=_OPTIONS)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def structure_error(exc: BaseException) -> str:
    """A readable, path-aware sentence for why structuring failed."""
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return str(exc)
