"""``callboard token add|list|remove``: scoped client tokens, kept in the data directory.

These work on the files, not over the gateway: whoever can write the data
directory is the operator already. A running server picks up a change at
the next connection's ``hello``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import CallboardError
from ..gateway import add_client_token, list_client_tokens, remove_client_token
from ._serve import DEFAULT_DATA, EXIT_FAILED, EXIT_USAGE

__all__ = ["add_parsers"]


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "token",
        help="make, list and remove scoped client tokens",
        description="Scoped client tokens: each reaches some actors, to read or to write. "
        "The operator token (DATA/token) reaches everything.",
    )
    verbs = parser.add_subparsers(dest="token_verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="make a token; prints it once (it is stored hashed)")
    add.add_argument("name", help="a name for the token (letters, digits, '-', '_', '.')")
    add.add_argument("--access", choices=["read", "write"], default="read",
                     help="read: subscribe, inspect, list; write: also send, spawn, stop "
                     "(%(default)s)")  # fmt: skip
    add.add_argument("--actor", action="append", required=True, metavar="PATTERN",
                     help="actors it reaches: KIND/NAME, KIND/*, KIND or * "
                     "(repeatable)")  # fmt: skip
    listing = verbs.add_parser("list", help="the client tokens (names and scopes, no secrets)")
    remove = verbs.add_parser("remove", help="remove a token; its holders are refused from now")
    remove.add_argument("name")
    for sub in (add, listing, remove):
        sub.add_argument("--data", default=DEFAULT_DATA, metavar="DIR",
                         help="the server's data directory (%(default)s)")  # fmt: skip
        sub.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run_token)


def run_token(args: argparse.Namespace) -> int:
    try:
        if args.token_verb == "add":
            token = add_client_token(args.data, args.name, access=args.access, actors=args.actor)
            if args.json:
                print(json.dumps({"name": args.name, "token": token}))
            else:
                print(token)
                print(f"callboard: token {args.name!r} made; it is shown only now", file=sys.stderr)
        elif args.token_verb == "list":
            tokens = list_client_tokens(args.data)
            if args.json:
                rows = [{"name": t.name, "access": t.access, "actors": list(t.actors)}
                        for t in tokens]  # fmt: skip
                print(json.dumps(rows))
            elif not tokens:
                print("no client tokens")
            else:
                width = max(len(t.name) for t in tokens)
                for t in tokens:
                    print(f"{t.name:<{width}}  {t.access:<5}  {' '.join(t.actors)}")
        else:
            remove_client_token(args.data, args.name)
            if not args.json:
                print(f"removed {args.name!r}")
    except ValueError as exc:
        print(f"callboard token: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CallboardError as exc:
        print(f"callboard token: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0
