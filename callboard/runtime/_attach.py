"""Live attach, the runtime's side: an actor's state read and replaced, its
mailbox paused, resumed and stepped (`callboard.supervisor._controls` runs them).

Each request goes to the actor's cell, activating one if the actor is not
in memory, so that it runs between two of the actor's batches and never
beside one. A new state is checked here first, against the kind's
``state_type``: it must structure into it *and* be stored exactly as given
(a field the type does not have, a missing one, or a value the converter
would change, such as ``"5"`` for an integer, is refused naming the field),
so that what ``state`` prints next is what was sent.
"""

from __future__ import annotations

from typing import Any

from ..actors import Actor
from ..codec import JSONShapeError, converter, dumps, loads, shown, structure_json
from ..errors import ActorStopped, BadRequest, UnknownActor
from ..mailbox import encode_body
from ..supervisor import Control
from . import _views
from ._directory import Directory

__all__ = ["checked_state", "control", "state"]


async def state(cells: Directory, address: str) -> Any:
    """The actor's last committed state, as JSON (its initial one before a commit)."""
    return (await _views.inspect(cells, address)).state


async def control(cells: Directory, address: str, request: Control) -> Any:
    """Run ``request`` on the actor's cell (activated for it) and return its outcome."""
    cells.kind_of(address)
    record = await cells.store.actor(address)
    if record is None:
        raise UnknownActor(f"there is no actor at {address!r}")
    if record.final:
        raise ActorStopped(
            f"{address} has ended ({record.status}); there is nothing to {request.what}"
        )
    cells.check_open()
    cell = cells.cells.get(address)
    if cell is None:
        if not cells.store.owns(address) and not await cells.store.claim(address):
            # Several nodes on one store: a cell here would run the actor beside
            # its owner's (its on_start, its activities) until its first write
            # met the fence, and the request would be answered by nobody.
            how = "edit its state" if request.what == "replace_state" else f"{request.what} it"
            raise BadRequest(
                f"{address!r} is active on another node; {how} through that node "
                "(callboard nodes lists them); nothing was changed"
            )
        cell = cells.cells.get(address) or cells.activate(address)
    return await cell.control(request)


def checked_state(cls: type[Actor], address: str, value: Any) -> Any:
    """``value`` as the state of a ``cls`` actor, or `BadRequest` naming the field."""
    what = f"the new state of {address!r}"
    state_type = cls.state_type
    if state_type is not dict and isinstance(value, state_type):
        value = loads(dumps(converter.unstructure(value)))
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object, got {shown(value)}; nothing was changed")
    encode_body(value, what=what)  # JSON within the limits every frame holds
    if state_type is dict:
        return loads(dumps(value))  # its own copy
    name = state_type.__qualname__
    try:
        structured = structure_json(value, state_type, what=what)
    except JSONShapeError as exc:
        raise BadRequest(f"{exc} (a {name}); nothing was changed") from None
    stored = loads(dumps(converter.unstructure(structured)))
    difference = _difference(value, stored, "$", name)
    if difference is not None:
        raise BadRequest(f"{what}: {difference}; nothing was changed")
    return structured


def _difference(given: Any, stored: Any, path: str, name: str) -> str | None:
    """Where ``given`` and what would be ``stored`` part, as the sentence about it."""
    if isinstance(given, dict) and isinstance(stored, dict):
        for key in given:
            if key not in stored:
                return f"{path}.{key} is not a field of {name}"
        for key in stored:
            if key not in given:
                return (
                    f"{path}.{key} is missing: a new state gives every field of {name} "
                    "(`callboard state ADDRESS` prints them)"
                )
        for key, value in given.items():
            found = _difference(value, stored[key], f"{path}.{key}", name)
            if found is not None:
                return found
        return None
    if isinstance(given, list) and isinstance(stored, list) and len(given) == len(stored):
        for index, (value, kept) in enumerate(zip(given, stored, strict=True)):
            found = _difference(value, kept, f"{path}[{index}]", name)
            if found is not None:
                return found
        return None
    if given == stored and isinstance(given, bool) == isinstance(stored, bool):
        # 1 for a float field is stored as 1.0: the same number.
        if type(given) is type(stored) or isinstance(given, int | float):
            return None
    return (
        f"{path} would be stored as {shown(stored)}, not {shown(given)}: give it as {name} holds it"
    )
