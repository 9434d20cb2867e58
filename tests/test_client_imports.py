"""What ``import callboard.client`` loads, and the lazy top-level package.

The client shares its types with the server through ``callboard.views`` and
imports nothing of the runtime, the store, the tools or the agent; the
top-level ``callboard`` imports each public name only when it is first used,
so importing any layer does not load the others. Each check runs in a fresh
interpreter: this test process has long since loaded everything.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import callboard

PACKAGE = Path(callboard.__file__).parent

# Every callboard module `import callboard.client` loads, by package.
CLIENT_PACKAGES = {
    "callboard",
    "callboard._local",
    "callboard._retry",
    "callboard._version",
    "callboard.client",
    "callboard.codec",
    "callboard.errors",
    "callboard.mailbox",
    "callboard.views",
}
NOT_FOR_THE_CLIENT = {
    "callboard.runtime",
    "callboard.store",
    "callboard.tools",
    "callboard.agent",
    "callboard.supervisor",
    "callboard.gateway",
    "callboard.jobs",
    "callboard.llm",
    "callboard.actors",
    "callboard.cli",
}


def loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_import_callboard_client_loads_only_the_layers_the_client_shares():
    modules = loaded_after("import callboard.client")
    ours = {m for m in modules if m == "callboard" or m.startswith("callboard.")}
    assert not [m for m in ours if package_of(m) in NOT_FOR_THE_CLIENT]
    assert "sqlite3" not in modules and "_sqlite3" not in modules
    assert "httpx" not in modules  # the model client's, not the gateway client's
    assert {package_of(m) for m in ours} == CLIENT_PACKAGES


def test_the_task_types_the_client_hands_out_are_the_runtimes():
    modules = loaded_after(
        "from callboard.client import RemoteTasks\n"
        "from callboard.views import RunSpec, Settled, TaskOperations\n"
        "assert RemoteTasks.wait.__module__ == 'callboard.client._tasks'"
    )
    assert not [m for m in modules if package_of(m) in NOT_FOR_THE_CLIENT]
    from callboard.agent import RunSpec, Settled, Succeeded, Tasks, TaskState
    from callboard.client import RemoteTasks, Spawned

    assert RunSpec is callboard.RunSpec is callboard.views.RunSpec
    assert Settled is callboard.Settled and Succeeded is callboard.Succeeded
    assert callboard.TaskOperations in Tasks.__mro__
    assert callboard.TaskOperations in RemoteTasks.__mro__
    assert Spawned is callboard.Address
    assert TaskState.__module__ == "callboard.agent._task_spec"


def test_a_plain_import_callboard_loads_no_layer_until_a_name_is_used():
    modules = loaded_after("import callboard")
    # The version's module is the only other one: a constant, no layer's code.
    assert {m for m in modules if m.startswith("callboard")} == {"callboard", "callboard._version"}
    modules = loaded_after(
        "import callboard\n"
        "assert callboard.__version__\n"
        "assert 'callboard.runtime' not in sys.modules\n"
        "assert callboard.Runtime.__name__ == 'Runtime'\n"
        "assert callboard.agent.builtin_kinds\n"
        "assert callboard.client.connect\n"
        "assert callboard.Tasks is callboard.agent.Tasks\n"
        "assert {'Runtime', 'agent', 'client', 'RunSpec'} <= set(dir(callboard))\n"
        "try:\n"
        "    callboard.nothing_by_this_name\n"
        "except AttributeError as exc:\n"
        "    assert 'nothing_by_this_name' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')"
    )
    assert {"callboard.runtime", "callboard.agent", "callboard.client"} <= modules


def test_from_callboard_import_star_gives_every_name_of_all():
    modules = loaded_after(
        "namespace = {}\n"
        "exec('from callboard import *', namespace)\n"
        "import callboard\n"
        "names = callboard.__all__\n"
        "missing = [n for n in names if namespace.get(n) is not getattr(callboard, n)]\n"
        "assert not missing, missing\n"
        "assert len(callboard.__all__) == len(set(callboard.__all__))"
    )
    assert "callboard.runtime" in modules


def test_each_public_name_is_exported_once_and_typed_where_it_is_loaded_from():
    """The lazy table and the TYPE_CHECKING imports say the same, for ``__all__``."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.level == 1
                for alias in imported.names:
                    assert alias.asname == alias.name, "re-exported under its own name"
                    assert alias.name not in typed, f"{alias.name} is exported twice"
                    typed[alias.name] = str(imported.module)
    lazy = {name: layer for layer, names in callboard._EXPORTS.items() for name in names}
    assert typed == lazy
    assert sorted(typed) == sorted(callboard.__all__)
    for name, layer in lazy.items():
        assert getattr(callboard, name) is getattr(getattr(callboard, layer), name)
