"""store_child.py's sends, with the store's files on the power-loss VFS.

``power_child.py DATA COUNT SYNCHRONOUS AT SEED`` runs the store with
``PRAGMA synchronous=SYNCHRONOUS`` and loses power at the AT-th write or sync
of its files, or, if every send was answered before that, right after
``done``; SEED draws the fates of the sectors written since their file's last
sync (see power_loss_vfs.py). It prints what store_child.py prints, and dies
of SIGKILL at the power loss.
"""

from __future__ import annotations

import sys

import trio
from power_loss_vfs import PowerLoss, install
from store_child import send

from callboard.store import _sqlite

VFS = "power-loss"


async def main(data: str, count: int, synchronous: str, at: int, seed: int) -> None:
    loss = PowerLoss(at, seed)
    install(VFS, loss)
    _sqlite._VFS = VFS  # the store's seam for this test
    _sqlite._SYNCHRONOUS = synchronous

    async def lose_power() -> None:
        loss.now()

    await send(data, count, halt=False, then=lose_power)


if __name__ == "__main__":
    data, count, synchronous, at, seed = sys.argv[1:]
    trio.run(main, data, int(count), synchronous, int(at), int(seed))
