"""What the facade reads for callers: an actor's view, pages of actors, a typed spec.

Functions over the runtime's `Directory` (for what is in memory here: an
actor active, or failing its commits) and its store (for what is durable).
"""

from __future__ import annotations

import builtins
from typing import Any

from ..actors import Actor
from ..codec import converter, loads, structure_error
from ..errors import BadRequest, UnknownActor
from ..mailbox import encode_body
from ..views import ActorInfo, ActorView
from ._directory import Directory

__all__ = ["inspect", "list_page", "structure_spec"]


async def inspect(cells: Directory, address: str) -> ActorView:
    """The last committed snapshot and the bookkeeping around it."""
    cls = cells.kind_of(address)
    record = await cells.store.actor(address)
    if record is None:
        raise UnknownActor(f"there is no actor at {address!r}")
    if record.state is not None:
        state = loads(record.state)
    else:
        spec = loads(record.spec) if record.spec else None
        if cls.spec_type is not None and spec is not None:
            spec = converter.structure(spec, cls.spec_type)
        state = converter.unstructure(cls.initial_state(spec))
    return ActorView(
        actor=address,
        kind=record.kind,
        status=_status(cells, address, record.status, record.final),
        state=state,
        cursor=record.cursor,
        mailbox=record.unhandled,
        head=record.event_head,
        restarts=record.restarts,
        last_error=_last_error(cells, address, record.last_error),
        owner=None if record.final else record.owner,
    )


async def list_page(
    cells: Directory, kind: str | None, status: str | None, *, after: str | None, limit: int
) -> tuple[builtins.list[ActorInfo], str | None]:
    """At most ``limit`` actors past the address ``after``, in address order,
    and the ``after`` of the next page (None when there is no more)."""
    if limit < 1:
        raise BadRequest(f"a page of actors needs a limit >= 1, got {limit!r}")
    if status == "active":
        return await _active_page(cells, kind, after, limit)
    # Stored status: "active" is this runtime's own knowledge, so a page
    # filtered by status may come out shorter than ``limit``.
    records = await cells.store.actors(kind, status=status, after=after, limit=limit + 1)
    more = len(records) > limit
    del records[limit:]
    rows = []
    for record in records:
        info = ActorInfo(
            record.address,
            _status(cells, record.address, record.status, record.final),
            record.unhandled,
            record.restarts,
            None if record.final else record.owner,  # an ended actor runs nowhere
        )
        if status is None or info.status == status:
            rows.append(info)
    return rows, records[-1].address if more else None


async def _active_page(
    cells: Directory, kind: str | None, after: str | None, limit: int
) -> tuple[builtins.list[ActorInfo], str | None]:
    prefix = f"{kind}/" if kind is not None else ""
    addresses = sorted(
        a for a in cells.cells if a.startswith(prefix) and (after is None or a > after)
    )
    rows: list[ActorInfo] = []
    for address in addresses:
        record = await cells.store.actor(address)
        if record is None or record.final:
            continue
        if len(rows) == limit:
            return rows, rows[-1].actor
        rows.append(ActorInfo(address, "active", record.unhandled, record.restarts, record.owner))
    return rows, None


def _last_error(cells: Directory, address: str, stored: bytes | None) -> dict[str, Any] | None:
    cell = cells.cells.get(address)
    if cell is not None and cell.commit_failure is not None:
        return {"error": cell.commit_failure, "during": "commit"}
    return loads(stored) if stored else None


def _status(cells: Directory, address: str, stored: str, final: bool) -> str:
    cell = cells.cells.get(address)
    if not final and cell is not None:
        # "failing": in memory, but the store refuses its commits (a full disk).
        return "failing" if cell.commit_failure is not None else "active"
    return stored


def structure_spec(cells: Directory, cls: type[Actor], spec: Any, address: str) -> Any:
    if cls.spec_type is None:
        if spec is not None and not isinstance(spec, dict):
            raise BadRequest(f"the spec for {address!r} must be a JSON object, got {spec!r}")
        encode_body(spec, what=f"the spec for {address!r}")
        cls.check_spec(spec, cells.settings_for(cls.kind))
        return spec
    try:
        typed = spec if isinstance(spec, cls.spec_type) else converter.structure(
            spec if spec is not None else {}, cls.spec_type
        )  # fmt: skip
    except Exception as exc:
        raise BadRequest(
            f"the spec for {address!r} is not a valid {cls.spec_type.__qualname__}: "
            f"{structure_error(exc)}"
        ) from None
    cls.check_spec(typed, cells.settings_for(cls.kind))
    return converter.unstructure(typed)
