"""The one on-disk and wire format: a cattrs converter over orjson.

Everything that leaves the process as JSON (snapshots, message bodies, event
data, specs, frames) goes through `converter`, so there is one place where a
type meets its serialized form.

JSON from outside is held to what it says. `check_loaded` refuses a text
that `loads` would change without a word: a key given twice in one object
keeps only its last value, and an integer past 64 bits becomes a float
(18446744073709551617 reads as 1.8446744073709552e+19). `dumps_within`
refuses a value nested deeper than a limit, so that what is accepted can
still be encoded inside the frames that later carry it: orjson encodes at
most 254 levels.
"""

from __future__ import annotations

import json
from typing import Any

import cattrs
import orjson
from cattrs.preconf.orjson import make_converter

__all__ = [
    "JSONRefused",
    "check_loaded",
    "converter",
    "dumps",
    "dumps_within",
    "loads",
    "structure_error",
]

converter = make_converter()

_OPTIONS = orjson.OPT_NON_STR_KEYS

# orjson refuses to encode a value nested deeper than this, with this message
# (a cycle gets it too). tests/test_json_limits.py pins both.
_ORJSON_DEPTH = 254
_ORJSON_TOO_DEEP = "Recursion limit reached"
_ORJSON_TOO_BIG = "Integer exceeds 64-bit range"
# The integers orjson reads and writes as integers; it reads others as floats.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
# Up to this size, counting a text's brackets costs less than encoding it wrapped.
_COUNT_BELOW = 4096
_PLUS = ord("+")
# Below this many bytes an encoded value is copied out of orjson's buffer (`_compact`).
_COMPACT_BELOW = 2048

# Chains of nested one-item lists, by the depth they leave for what is put in
# their innermost list. A chain is popped while in use (by a thread, or a
# signal handler meanwhile) and pushed back after, so none is shared.
_Chain = tuple[list[Any], list[Any]]
_chains: dict[int, list[_Chain]] = {}


class JSONRefused(ValueError):
    """JSON that `check_loaded` does not take; ``pointer`` (RFC 6901) says where."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer


def dumps(value: Any) -> bytes:
    """Serialize an already-unstructured value; raises TypeError on what JSON cannot hold."""
    return _compact(orjson.dumps(value, option=_OPTIONS))


def _compact(data: bytes) -> bytes:
    # orjson's bytes keep the 4 KB buffer they were written into, however
    # short the JSON: a small one is copied to its own size, so that the
    # bodies and event data a batch holds do not take a page each.
    return memoryview(data).tobytes() if len(data) < _COMPACT_BELOW else data


def kept_copy(data: bytes) -> bytes:
    """``data``, made by `dumps`, in memory of its own size, for a value kept long
    (an active actor's last snapshot): the large ones are copied out of orjson's
    buffer here, the small ones `dumps` copied out already."""
    return data if len(data) < _COMPACT_BELOW else memoryview(data).tobytes()


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def dumps_within(value: Any, depth: int) -> bytes | None:
    """`dumps`, or None when ``value`` nests arrays and objects more than ``depth`` deep.

    ``[1]`` is one level deep, ``{"a": [1]}`` two. Raises TypeError, as
    `dumps` does, on what JSON cannot hold; for an integer past 64 bits the
    message names where it is.
    """
    data: bytes | None
    try:
        data = orjson.dumps(value, option=_OPTIONS)  # the common case, with no call around it
    except TypeError:
        data = _dumps_or_none(value, value)  # None when too deep; else raises, saying where
        if data is None:
            return None
    if _may_nest_deeper(data, depth) and _encode(value, depth) is None:
        return None
    return _compact(data)


def check_loaded(text: str, value: Any, *, depth: int) -> None:
    """Raise `JSONRefused` unless ``value``, which is ``loads(text)``, is just what
    ``text`` says and nests at most ``depth`` deep (see `dumps_within`).

    Refused: nesting deeper than ``depth``, a key twice in one object, and an
    integer outside -2**63 .. 2**64-1. The message names the place with a
    JSON Pointer. Costs one `dumps` and a few scans of the text; only when
    those cannot rule a problem out is the text parsed again, exactly.
    """
    if len(text) > _COUNT_BELOW:
        data = _encode(value, depth)  # one pass encodes and checks the depth
    elif (data := _encode(value, None)) is not None and _may_nest_deeper(data, depth):
        data = _encode(value, depth)
    if data is None:
        raise _too_deep(value, depth)
    # A key given twice leaves one colon fewer in ``data`` than in ``text``
    # (colons elsewhere are inside strings, and orjson never escapes them; a
    # colon escaped as \u003a in ``text`` is the one way to hide one). An
    # integer past 64 bits is now a float of 2**63 or more, which orjson
    # writes with an exponent, "e+" (also found in strings: base64, say).
    # One character (a str, or an int in bytes) is found with memchr, far
    # quicker than two: hence the pairs.
    if (
        text.count(":") != data.count(b":")
        or ("\\" in text and "\\u003" in text)
        or (_PLUS in data and b"e+" in data and _holds_big_float(value))
    ):
        _check_exactly(text)


def _may_nest_deeper(data: bytes, depth: int) -> bool:
    # Nesting deeper than ``depth`` takes depth + 1 opening brackets and as
    # many closing ones: a short text cannot, and a small one is cheap to
    # count. A big one is cheaper to encode again, wrapped (`_encode`).
    if len(data) < 2 * (depth + 1):
        return False
    return len(data) > _COUNT_BELOW or data.count(b"[") + data.count(b"{") > depth


def _encode(value: Any, depth: int | None) -> bytes | None:
    """``value`` encoded, or None if orjson finds it too deep.

    With ``depth``, ``value`` is encoded inside _ORJSON_DEPTH - ``depth``
    arrays, so that it fits only if it nests at most ``depth`` deep: orjson
    checks its own limit, in C, as it encodes, and no walk over the value in
    Python is needed. (The wrapping costs about 2 us: hence `_may_nest_deeper`.)
    """
    if depth is None:
        return _dumps_or_none(value, value)
    if not 0 < depth < _ORJSON_DEPTH:
        raise ValueError(f"depth must be from 1 to {_ORJSON_DEPTH - 1}, got {depth}")
    pool = _chains.setdefault(depth, [])
    try:
        outer, inner = pool.pop()
    except IndexError:
        outer = inner = [None]
        for _ in range(_ORJSON_DEPTH - depth - 1):
            outer = [outer]
    inner[0] = value
    try:
        return _dumps_or_none(outer, value)
    finally:
        inner[0] = None
        pool.append((outer, inner))


def _dumps_or_none(outer: Any, value: Any) -> bytes | None:
    try:
        return orjson.dumps(outer, option=_OPTIONS)
    except TypeError as exc:
        if str(exc) == _ORJSON_TOO_DEEP:
            return None
        if str(exc) == _ORJSON_TOO_BIG and (found := _first_problem(value, "")) is not None:
            raise TypeError(str(found)) from None
        raise


def _holds_big_float(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_big_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_big_float(item) for item in value)
    return isinstance(value, float) and not -(2.0**63) < value < 2.0**63


class _Repeated(dict[str, Any]):
    """An object in which ``key`` was given more than once."""

    __slots__ = ("key",)
    key: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            break
        seen.add(key)
    repeated = _Repeated(obj)
    repeated.key = key
    return repeated


def _check_exactly(text: str) -> None:
    # The standard library's parser keeps every integer exact and hands over
    # every key, which orjson cannot do. Slower; reached only when needed.
    try:
        exact = json.loads(text, object_pairs_hook=_pairs)
    except ValueError as exc:  # e.g. an integer of more digits than int() reads
        raise JSONRefused("", f"the JSON cannot be read exactly: {exc}") from None
    found = _first_problem(exact, "")
    if found is not None:
        raise found


def _first_problem(value: Any, pointer: str) -> JSONRefused | None:
    """The first repeated key or integer past 64 bits in ``value``, in document order."""
    if isinstance(value, dict):
        if isinstance(value, _Repeated):
            where = f"the object at {pointer}" if pointer else "the top-level object"
            return JSONRefused(
                f"{pointer}/{_escape(value.key)}",
                f"{where} has the key {value.key!r} more than once; give each key once "
                "(a repeated key would silently replace the first)",
            )
        for key, item in value.items():
            if (found := _first_problem(item, f"{pointer}/{_escape(str(key))}")) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _first_problem(item, f"{pointer}/{index}")) is not None:
                return found
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT_MIN <= value <= _INT_MAX:
            shown = str(value) if value.bit_length() <= 256 else f"of {value.bit_length()} bits"
            return JSONRefused(
                pointer,
                f"{_the_value_at(pointer)} is the integer {shown}, outside the 64-bit range "
                f"integers are kept in exactly ({_INT_MIN} to {_INT_MAX}); send it as a string",
            )
    return None


def _too_deep(value: Any, depth: int) -> JSONRefused:
    """Name the member too deep for its place (a value too deep is a container)."""
    members = value.items() if isinstance(value, dict) else enumerate(value)
    if depth > 1:
        for key, item in members:
            if dumps_within(item, depth - 1) is None:
                pointer = f"/{_escape(str(key))}"
                return JSONRefused(
                    pointer,
                    f"{_the_value_at(pointer)} nests arrays and objects deeper than "
                    f"{depth - 1} levels, the limit",
                )
    message = f"the value nests arrays and objects deeper than {depth} levels, the limit"
    return JSONRefused("", message)


def _the_value_at(pointer: str) -> str:
    return f"the value at {pointer}" if pointer else "the value"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def structure_error(exc: BaseException) -> str:
    """A readable, path-aware sentence for why structuring failed."""
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return str(exc)
