"""JSON from outside structured as it is, with errors that name the field.

The converter's own hooks for ``str``, ``int`` and ``bool`` coerce (``5``
becomes ``"5"``, ``"no"`` becomes True): right for what the process wrote
itself, wrong for what a client sent. `strict_json` registers, for one attrs
class, a hook that takes each JSON scalar only as itself: a ``str`` field
takes a string, an ``int`` an integer (a boolean is none), a ``bool`` true or
false, a ``float`` a number, a ``Literal`` one of its values; ``X | None``
also takes null, which is the same as leaving the field out. A field whose
type is ``Annotated[T,
override(struct_hook=hook)]`` (cattrs' own way to give one field its hook),
or such a type ``| None``, is structured by ``hook``, which raises `Refused`
saying what it wanted; any other type (``Any``, an attrs class) by the hook
the converter has for it. `refusals` reads a failed structuring back as the
path to each wrong field and what was wrong with it, and `structure_json`
words that for a person: "the body of 'prompt' to session/s1: $.text must be
a string, got 5 (a number)".
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, Union

import attrs
import orjson
from cattrs import BaseValidationError
from cattrs.errors import AttributeValidationNote, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, override

from ._codec import converter

__all__ = [
    "JSONShapeError",
    "Refused",
    "refusals",
    "shown",
    "strict_json",
    "structure_json",
]

T = TypeVar("T")
_Hook = Callable[[Any, Any], Any]
Path = tuple[str | int, ...]


class Refused(TypeError):
    """A value a structure hook does not take.

    ``predicate`` is the rest of a sentence whose subject is the field: "must
    be a string, got 5 (a number)". ``field`` names another field than the one
    being structured, for a rule across fields (raised by an attrs validator).
    A TypeError, so that cattrs' own formatter (`structure_error`) keeps it.
    """

    def __init__(self, predicate: str, field: str | None = None) -> None:
        super().__init__(predicate)
        self.predicate = predicate
        self.field = field


class JSONShapeError(ValueError):
    """A JSON value that does not structure into its type; the message names the field."""


_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def shown(value: Any) -> str:
    """A value as an error message shows it: short, with its JSON type."""
    try:
        text = orjson.dumps(value).decode() if not isinstance(value, float) else repr(value)
    except TypeError:  # nested deeper than orjson goes: shown by its type alone
        text = "[...]" if isinstance(value, list) else "{...}"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({_JSON_TYPES.get(type(value), 'a value')})"


def _string(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise Refused(f"must be a string, got {shown(value)}")
    return value


def _integer(value: Any, _: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"must be an integer, got {shown(value)}")
    return value


def _flag(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"must be true or false, got {shown(value)}")
    return value


def _number(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"must be a number, got {shown(value)}")
    return float(value)


def _object(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refused(f"must be an object, got {shown(value)}")
    return value


def _one_of(choices: tuple[Any, ...]) -> _Hook:
    """A ``Literal`` field: one of ``choices``, each as itself (``1`` is not ``True``)."""
    shown_choices = [repr(choice) for choice in choices]
    words = (
        f"{', '.join(shown_choices[:-1])} or {shown_choices[-1]}"
        if len(choices) > 1
        else shown_choices[0]
    )

    def structure(value: Any, _: Any) -> Any:
        if not any(type(value) is type(c) and value == c for c in choices):
            raise Refused(f"must be {words}, got {shown(value)}")
        return value

    return structure


_SCALARS: dict[Any, _Hook] = {str: _string, int: _integer, bool: _flag, float: _number}
_OVERRIDE = type(override())


def _optional(hook: _Hook) -> _Hook:
    def structure(value: Any, hint: Any) -> Any:
        return None if value is None else hook(value, hint)

    return structure


def _strict_hook(hint: Any) -> _Hook | None:
    """The strict hook for a field of type ``hint``; None leaves it to the converter."""
    if typing.get_origin(hint) is Annotated:
        for meta in hint.__metadata__:
            if isinstance(meta, _OVERRIDE) and meta.struct_hook is not None:
                return meta.struct_hook
        hint = typing.get_args(hint)[0]
    if hint in _SCALARS:
        return _SCALARS[hint]
    if typing.get_origin(hint) is typing.Literal:
        return _one_of(typing.get_args(hint))
    if typing.get_origin(hint) is dict:
        return _object
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(members) == 1 and len(members) < len(typing.get_args(hint)):
            inner = _strict_hook(members[0])
            return None if inner is None else _optional(inner)
    return None


def strict_json(shorthand: str | None = None) -> Callable[[type[T]], type[T]]:
    """A class decorator: structure the attrs class strictly (see the module docstring).

    Unknown keys are ignored; null is an object with no fields. With
    ``shorthand``, a value that is not an object stands for ``{shorthand: value}``
    (``"hi"`` for ``{"text": "hi"}``). Apply it before the class is used in a
    union or another class, whose hooks take the class's hook when made.
    """

    def register(cls: type[T]) -> type[T]:
        attrs.resolve_types(cls)  # type: ignore[type-var]
        overrides = {}
        for field in attrs.fields(cls):  # type: ignore[arg-type]
            hook = _strict_hook(field.type)
            if hook is not None:
                overrides[field.name] = override(struct_hook=hook)
        structure = make_dict_structure_fn(cls, converter, **overrides)  # type: ignore[arg-type]

        def structure_strictly(value: Any, _: Any) -> T:
            if value is None:
                value = {}
            elif not isinstance(value, dict):
                if shorthand is None:
                    raise Refused(f"must be an object, got {shown(value)}")
                value = {shorthand: value}
            return structure(value, cls)

        converter.register_structure_hook(cls, structure_strictly)
        return cls

    return register


def refusals(exc: BaseException, path: Path = ()) -> list[tuple[Path, BaseException]]:
    """Each error inside a failed structuring, with the path to the field it is about.

    A missing field is its KeyError; a refused value its `Refused`. In field
    order: the first is the first field that was wrong.
    """
    if not isinstance(exc, BaseValidationError):
        if isinstance(exc, Refused) and exc.field is not None:
            path = (*path, exc.field)
        return [(path, exc)]
    found = []
    for inner in exc.exceptions:
        where = path
        for note in getattr(inner, "__notes__", ()):
            if isinstance(note, AttributeValidationNote):
                where = (*path, note.name)
            elif isinstance(note, IterableValidationNote):
                where = (*path, note.index)
        found.extend(refusals(inner, where))
    return found


def _json_path(path: Path) -> str:
    return "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)


def _predicate(exc: BaseException) -> str:
    if isinstance(exc, Refused):
        return exc.predicate
    if isinstance(exc, KeyError):
        return "is missing"
    return f"is not valid ({exc})"


def structure_json(value: Any, cls: type[T], *, what: str) -> T:
    """``value`` (JSON, loaded) as ``cls``; raises `JSONShapeError` saying which
    field of ``what`` (e.g. "the body of 'prompt' to session/s1") was wrong."""
    try:
        return converter.structure(value, cls)
    except (BaseValidationError, Refused) as exc:
        found = refusals(exc)
        if len(found) == 1 and not found[0][0]:
            raise JSONShapeError(f"{what} {_predicate(found[0][1])}") from None
        each = "; ".join(f"{_json_path(path)} {_predicate(inner)}" for path, inner in found)
        raise JSONShapeError(f"{what}: {each}") from None
