"""What the facade reads for callers: an actor's view, pages of actors, a typed spec.

Functions over the runtime's `Directory` (for what is in memory here: an
actor active, or failing its commits) and its store (for what is durable).
"""

from __future__ import annotations

import builtins
import difflib
from typing import Any

import attrs

from ..actors import Actor
from ..codec import Refused, converter, loads, refusals, structure_error
from ..errors import BadRequest, UnknownActor
from ..mailbox import encode_body
from ..store import Store
from ..views import ActorInfo, ActorView, mask_secrets
from ._directory import Directory

__all__ = ["inspect", "list_page", "shown_status", "structure_spec"]


async def inspect(cells: Directory, address: str) -> ActorView:
    """The last committed snapshot and the bookkeeping around it."""
    cls = cells.kind_of(address)
    record = await cells.store.actor(address)
    if record is None:
        raise UnknownActor(f"there is no actor at {address!r}")
    spec = loads(record.spec) if record.spec else None
    if record.state is not None:
        state = loads(record.state)
    else:
        try:
            typed = (
                converter.structure(spec, cls.spec_type)
                if cls.spec_type is not None and spec is not None
                else spec
            )
        except Exception:
            # A spec that no longer structures: the actor fails on it, and its
            # last_error (below) says why; there is no state to show.
            state = None
        else:
            # A bug of the kind's own is not caught: it is answered ``internal``.
            state = converter.unstructure(cls.initial_state(typed))
    return ActorView(
        actor=address,
        kind=record.kind,
        status=shown_status(cells, address, record.status, record.final, record.paused),
        state=state,
        cursor=record.cursor,
        mailbox=record.unhandled,
        head=record.event_head,
        restarts=record.restarts,
        last_error=_last_error(cells, address, record.last_error),
        spec=mask_secrets(spec),
        summary=await cls.summarize(state, _Logs(cells.store, address)),
        owner=None if record.final else record.owner,
    )


class _Logs:
    """One actor's committed logs, for `Actor.summarize`."""

    def __init__(self, store: Store, address: str) -> None:
        self._store, self._address = store, address

    async def read_log(self, log: str, start: int = 0, limit: int = 1000) -> builtins.list[Any]:
        return [loads(b) for b in await self._store.read_log(self._address, log, start, limit)]

    async def log_length(self, log: str) -> int:
        return await self._store.log_length(self._address, log)


async def list_page(
    cells: Directory, kind: str | None, status: str | None, *, after: str | None, limit: int
) -> tuple[builtins.list[ActorInfo], str | None]:
    """At most ``limit`` actors past the address ``after``, in address order,
    and the ``after`` of the next page (None when there is no more)."""
    if limit < 1:
        raise BadRequest(f"a page of actors needs a limit >= 1, got {limit!r}")
    if status in _IN_MEMORY:
        return await _in_memory_page(cells, kind, status, after, limit)
    # Stored status: "active" is this runtime's own knowledge, so a page
    # filtered by status may come out shorter than ``limit``.
    # "paused" is a flag of the row beside its stored status: filtered below.
    stored = None if status == "paused" else status
    records = await cells.store.actors(kind, status=stored, after=after, limit=limit + 1)
    more = len(records) > limit
    del records[limit:]
    rows = []
    for record in records:
        info = ActorInfo(
            record.address,
            shown_status(cells, record.address, record.status, record.final, record.paused),
            record.unhandled,
            record.restarts,
            None if record.final else record.owner,  # an ended actor runs nowhere
        )
        if status is None or info.status == status:
            rows.append(info)
    return rows, records[-1].address if more else None


_IN_MEMORY = ("active", "waiting", "failing")
"""Statuses only this runtime knows (its cells'): a page of them reads no listing."""


async def _in_memory_page(
    cells: Directory, kind: str | None, status: str, after: str | None, limit: int
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
        shown = shown_status(cells, address, record.status, record.final, record.paused)
        if shown != status:
            continue
        if len(rows) == limit:
            return rows, rows[-1].actor
        rows.append(ActorInfo(address, shown, record.unhandled, record.restarts, record.owner))
    return rows, None


def _last_error(cells: Directory, address: str, stored: bytes | None) -> dict[str, Any] | None:
    cell = cells.cells.get(address)
    if cell is not None and cell.commit_failure is not None:
        return {"error": cell.commit_failure, "during": "commit"}
    return loads(stored) if stored else None


def shown_status(
    cells: Directory, address: str, stored: str, final: bool, paused: bool = False
) -> str:
    """The status an actor is shown with: the stored one, or what this runtime knows."""
    cell = cells.cells.get(address)
    if not final and cell is not None:
        # "failing": in memory, but the store refuses its commits (a full disk).
        if cell.commit_failure is not None:
            return "failing"
        # Paused by its row until the cell has read it (at its start).
        if cell.paused or paused:
            return "paused"
        return "waiting" if cell.waiting_for_approval else "active"
    # A paused actor out of memory is paused still: its row holds the pause.
    return "paused" if paused and not final else stored


def structure_spec(cells: Directory, cls: type[Actor], spec: Any, address: str) -> Any:
    if cls.spec_type is None:
        if spec is not None and not isinstance(spec, dict):
            raise BadRequest(f"the spec for {address!r} must be a JSON object, got {spec!r}")
        encode_body(spec, what=f"the spec for {address!r}")
        cls.check_spec(spec, cells.settings_for(cls.kind))
        return spec
    if isinstance(spec, dict):
        _refuse_unknown_keys(cls.spec_type, spec, address)
    try:
        typed = spec if isinstance(spec, cls.spec_type) else converter.structure(
            spec if spec is not None else {}, cls.spec_type
        )  # fmt: skip
    except Exception as exc:
        raise BadRequest(
            f"the spec for {address!r} is not a valid {cls.spec_type.__qualname__}: "
            f"{_spec_error(exc)}"
        ) from None
    cls.check_spec(typed, cells.settings_for(cls.kind))
    return converter.unstructure(typed)


def _refuse_unknown_keys(spec_type: type[Any], spec: dict[Any, Any], address: str) -> None:
    """A key the spec type has no field for is a mistake (``"aprovals"``), not
    something to ignore while the default applies: refuse it, naming the
    fields. Generic over the kind's attrs class, so a new field needs nothing here."""
    if not attrs.has(spec_type):
        return
    fields = [field.name for field in attrs.fields(spec_type)]
    unknown = [key for key in spec if key not in fields]
    if not unknown:
        return
    shown = ", ".join(repr(key) for key in unknown)
    close = {
        key: match[0]
        for key in unknown
        if isinstance(key, str) and (match := difflib.get_close_matches(key, fields, n=1))
    }
    if len(unknown) == 1 and close:
        hint = f" (did you mean {next(iter(close.values()))!r}?)"
    elif close:
        hint = f" (did you mean {', '.join(f'{m!r} for {k!r}' for k, m in close.items())}?)"
    else:
        hint = ""
    raise BadRequest(
        f"the spec for {address!r} has {'an unknown key' if len(unknown) == 1 else 'unknown keys'} "
        f"{shown}{hint}; a {spec_type.__qualname__} takes {', '.join(fields)}"
    )


def _spec_error(exc: BaseException) -> str:
    """Why a spec did not structure: in a strict field's own words (`Refused`:
    "must be true or false, got "no" (a string) @ $.background_on_timeout"),
    else in cattrs' (`structure_error`), which drops those words."""
    found = refusals(exc)
    if not found or not all(isinstance(inner, Refused) for _, inner in found):
        return structure_error(exc)
    return "; ".join(
        f"{inner} @ $" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)
        for path, inner in found
    )
