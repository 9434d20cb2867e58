"""store_child.py's sends, with I/O calls of the store's files failing (io_faults.py).

``fault_child.py DATA COUNT sync AT [halt]`` fails the AT-th sync of the
process; ``fault_child.py DATA COUNT write ERROR FIRST LAST [halt]`` fails
its writes FIRST to LAST with ERROR (ENOSPC or EIO). It prints what
store_child.py prints; with COUNT 0 it then prints how many writes and
syncs opening the store took (``{"writes": W, "syncs": S}``) and exits.
"""

from __future__ import annotations

import json
import sys

import trio
from io_faults import IoFaults
from power_loss_vfs import install
from store_child import send

from callboard.store import _sqlite

VFS = "io-faults"


async def main(data: str, count: int, faults: IoFaults, halt: bool) -> None:
    install(VFS, faults)
    _sqlite._VFS = VFS  # the store's seam for this test

    async def report() -> None:
        if count:
            await trio.sleep_forever()  # the test kills it
        print(json.dumps({"writes": faults.writes, "syncs": faults.syncs}), flush=True)

    await send(data, count, halt, then=report)


if __name__ == "__main__":
    data, count, what, *rest = sys.argv[1:]
    halt = rest[-1:] == ["halt"]
    if what == "sync":
        faults = IoFaults(sync_at=int(rest[0]))
    else:
        faults = IoFaults(writes=(int(rest[1]), int(rest[2])), write_error=rest[0])
    trio.run(main, data, int(count), faults, halt)
