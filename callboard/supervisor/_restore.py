"""Restoring an actor from its last commit: the spec, the snapshot, migrations."""

from __future__ import annotations

from typing import Any

from ..actors import Actor
from ..codec import converter, loads, structure_error
from ..errors import StateError
from ..store import ActorRecord

__all__ = ["restore"]


def restore(cls: type[Actor], address: str, record: ActorRecord) -> Actor:
    """An instance of ``cls`` from the committed ``record``: its spec, and its
    snapshot (migrated if written at another ``state_version``) or initial state.
    Either not structuring is a `StateError`: `Permanent`, so the actor fails at once."""
    spec: Any = None
    try:
        spec = loads(record.spec) if record.spec is not None else None
        if cls.spec_type is not None and spec is not None:
            spec = converter.structure(spec, cls.spec_type)
    except Exception as exc:
        raise StateError(
            f"the spec {address!r} was spawned with does not structure into "
            f"{getattr(cls.spec_type, '__qualname__', 'JSON')}: {structure_error(exc)}; "
            "make the spec class take what it was spawned with"
        ) from exc
    try:
        if record.state is None:
            state = cls.initial_state(spec)
        else:
            data = loads(record.state)
            if record.state_version != cls.state_version and isinstance(data, dict):
                data = cls.migrate(data, record.state_version)
            state = data if cls.state_type is dict else converter.structure(data, cls.state_type)
    except Exception as exc:
        detail = structure_error(exc)
        raise StateError(
            f"the snapshot of {address!r} (version {record.state_version}) does not "
            f"structure into {getattr(cls.state_type, '__qualname__', cls.state_type)} "
            f"(version {cls.state_version}): {detail}; fix the state class or migrate it "
            f"in {cls.__qualname__}.migrate()"
        ) from exc
    return cls(address, spec, state)
