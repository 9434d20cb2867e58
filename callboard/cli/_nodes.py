"""``callboard nodes``: the nodes sharing the server's store, and whose actors are whose.

Several ``callboard serve`` on one PostgreSQL database are nodes: each row
is one, with its last heartbeat (by the database's clock) and how many
actors it owns. A node whose heartbeat is older than its ``--lease-ttl``
is gone (killed, or cut off); its actors go to the others. On one node
(SQLite) there are none to list. ``ls`` and ``inspect`` name an actor's
owner the same way, where it has one.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..client import Client
from ._commands import add_common, run_command
from ._verbs import Output, Verb, table

__all__ = ["NODES", "add_parsers"]


def _no_args(p: argparse.ArgumentParser) -> None:
    return None


async def _nodes(client: Client, args: argparse.Namespace, out: Output) -> None:
    nodes = await client.nodes()
    if not nodes and not out.json:
        out.write("no nodes (the server's store is its own: one node, SQLite)")
        return
    rows = [[n["node"], n["heartbeat"], str(n["actors"])] for n in nodes]
    out.emit(table(["NODE", "HEARTBEAT", "ACTORS"], rows), {"nodes": nodes})


NODES = Verb("nodes", "list the nodes sharing the store: heartbeat and actors owned",
             _no_args, _nodes)  # fmt: skip


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(NODES.name, help=NODES.summary, description=NODES.summary)
    NODES.add_arguments(parser)
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of columns")
    parser.set_defaults(func=lambda args: run_command(NODES, args))
