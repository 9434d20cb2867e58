"""`tune_gc`, the collector settings `callboard serve` runs with: checked in a
child process, since they are the whole process's."""

from __future__ import annotations

import json
import subprocess
import sys

from callboard.runtime._gc import YOUNG_THRESHOLD

_CHILD = """
import gc, json, weakref
import callboard
class Node: pass
before = gc.get_threshold()
gc.disable()
garbage = Node(); garbage.me = garbage; dead = weakref.ref(garbage); del garbage
callboard.tune_gc()
print(json.dumps({"before": before, "after": gc.get_threshold(),
                  "frozen": gc.get_freeze_count(), "cycle_freed": dead() is None}))
"""


def test_tune_gc_freezes_what_the_process_holds_and_raises_only_the_young_threshold():
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(done.stdout)
    older = seen["before"][1:]
    assert seen["after"] == [YOUNG_THRESHOLD, *older]
    # Everything alive was moved out of later collections (the modules alone
    # are thousands of objects); the cycle made before was collected, not frozen.
    assert seen["frozen"] > 1000
    assert seen["cycle_freed"]
