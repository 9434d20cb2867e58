"""Spawning and stopping actors: the `Runtime` methods that start and end one.

Functions over the runtime's `Directory`, as `_views` and `_operator` are;
the `Runtime` facade offers each as a method.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import BadRequest, SpawnConflict, UnknownActor
from ..mailbox import Address, new_name
from . import _views
from ._directory import Directory

__all__ = ["spawn", "stop"]


def _spec_bytes(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


async def spawn(cells: Directory, kind: str, spec: Any, name: str | None) -> Address:
    """`Runtime.spawn`: the spec is checked and stored; a new actor is activated
    here unless another node holds it."""
    cls = cells.check_kind(kind)
    address = Address(f"{kind}/{name if name is not None else new_name()}")
    spec_json = _spec_bytes(_views.structure_spec(cells, cls, spec, address))
    cells.check_open()
    existed, stored = await cells.store.spawn(address, kind, spec_json)
    if existed:
        record = await cells.store.actor(address)
        if record is not None and record.final:
            raise SpawnConflict(
                f"{address!r} has ended ({record.status}) and takes no more messages; "
                f"delete it first to reuse the name (callboard delete {address}, or "
                "Runtime.delete), or pick another name"
            )
    if existed and stored is not None and stored != spec_json:
        raise SpawnConflict(
            f"{address!r} exists with a different spec; pick another name or stop it first"
        )
    if not existed and (cells.store.owns(address) or await cells.store.claim(address)):
        if address not in cells.cells:
            cells.activate(address)
    return Address(address, existed=existed)


async def stop(cells: Directory, address: str) -> str:
    """`Runtime.stop`: through a cell of this node (activated to stop it, if need be)."""
    cells.kind_of(address)
    record = await cells.store.actor(address)
    if record is None:
        raise UnknownActor(f"there is no actor at {address!r}")
    if record.final:
        return record.status
    if address not in cells.cells and not cells.store.owns(address):
        # Several nodes on one store: it is stopped where it runs.
        if not await cells.store.claim(address):
            raise BadRequest(
                f"{address!r} is active on another node; stop it through that node "
                "(callboard nodes lists them)"
            )
    cell = cells.cells.get(address)
    if cell is None:
        cell = cells.activate(address, stop=True)
    else:
        cell.request_stop()
    await cell.done.wait()
    return cell.final_status or "stopped"
