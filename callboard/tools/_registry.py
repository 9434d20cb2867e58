"""The tools the model sees, how its arguments are checked, and the file-tool dispatch.

The JSON schemas below are the single source of truth: ``parse_arguments``
checks the model's arguments against the same ``properties``/``required`` the
model was shown, so the two cannot drift apart. Its refusals are sentences
naming the tool and the field, because the agent hands them back to the model
as the tool's result and the model corrects itself from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from callboard.errors import ToolError

from ._files import MAX_LIST_ENTRIES, MAX_READ_BYTES, edit_file, list_dir, read_file, write_file
from ._workspace import Workspace

__all__ = [
    "FILE_TOOL_NAMES",
    "TOOL_NAMES",
    "parse_arguments",
    "run_file_tool",
    "tool_schemas",
]


def _object(properties: dict[str, dict[str, Any]], *required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {
    "type": "string",
    "description": "A path inside the workspace, relative to its root (or absolute inside it).",
}

_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a UTF-8 text file in the workspace. At most "
        f"{MAX_READ_BYTES} bytes come back at a time; when the file goes on, the last "
        "line says '[cut: ...]' and gives the offset to read the rest from.",
        _object(
            {
                "path": _PATH,
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The byte to start at (default 0).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"The most bytes to return (default and cap {MAX_READ_BYTES}).",
                },
            },
            "path",
        ),
    ),
    "write_file": (
        "Create or overwrite a file in the workspace with the given text, creating "
        "missing directories. The file holds exactly `content` afterwards.",
        _object(
            {"path": _PATH, "content": {"type": "string", "description": "The whole new text."}},
            "path",
            "content",
        ),
    ),
    "edit_file": (
        "Replace the exact text `old` with `new` in a file in the workspace. `old` must "
        "appear exactly once (copy it from read_file, whitespace included) unless "
        "`replace_all` is true.",
        _object(
            {
                "path": _PATH,
                "old": {"type": "string", "description": "The exact text to replace."},
                "new": {"type": "string", "description": "The text to put in its place."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence of `old` (default false).",
                },
            },
            "path",
            "old",
            "new",
        ),
    ),
    "list_dir": (
        "List a directory in the workspace, sorted by name: directories end in '/', "
        f"symbolic links read 'name -> target'. At most {MAX_LIST_ENTRIES} entries.",
        _object(
            {"path": {**_PATH, "description": "The directory to list (default '.', the root)."}}
        ),
    ),
    "shell_run": (
        "Run a shell command (/bin/sh) in the workspace and return its output and exit "
        "status. A command still running at its timeout becomes a background job; "
        "read it with job_output.",
        _object(
            {
                "command": {"type": "string", "description": "The shell command to run."},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Seconds to wait before it goes to the background.",
                },
                "background": {
                    "type": "boolean",
                    "description": "Start it as a background job at once (default false).",
                },
            },
            "command",
        ),
    ),
    "job_output": (
        "Read the output of a background job from a byte offset, and whether it has ended.",
        _object(
            {
                "job_id": {"type": "string", "description": "The job's id."},
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The byte of output to start at (default 0).",
                },
            },
            "job_id",
        ),
    ),
    "job_list": ("List your background jobs and their status.", _object({})),
    "job_stop": (
        "Stop a background job and every process it started.",
        _object({"job_id": {"type": "string", "description": "The job's id."}}, "job_id"),
    ),
}

TOOL_NAMES: tuple[str, ...] = tuple(_TOOLS)
"""Every tool the agent offers, in the order the model is shown them."""

FILE_TOOL_NAMES: tuple[str, ...] = ("read_file", "write_file", "edit_file", "list_dir")
"""The tools ``run_file_tool`` runs; the shell tools are dispatched elsewhere."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def tool_schemas(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Return the OpenAI ``tools`` entries for ``names`` (all tools by default), in order.

    Each call builds fresh dicts, so a caller may change what it gets back.

    Raises:
        ValueError: a name is not a tool.
    """
    chosen = TOOL_NAMES if names is None else tuple(names)
    for name in chosen:
        if name not in _TOOLS:
            raise ValueError(f"there is no tool named {name!r}; the tools are {_listing()}")
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": _TOOLS[name][0],
                "parameters": json.loads(json.dumps(_TOOLS[name][1])),
            },
        }
        for name in chosen
    ]


def parse_arguments(name: str, arguments_json: str) -> dict[str, Any]:
    """Parse and check the model's JSON arguments for the tool ``name``.

    Required fields must be present and every field must have the type (and
    lower bound) its schema gives. A ``null`` optional field counts as absent,
    as strict-mode models send them; ``""`` counts as ``{}`` for tools without
    parameters; a whole-number float is accepted for an integer. Returns only
    the fields that were given.

    Raises:
        ToolError: a sentence naming the tool and the field at fault.
    """
    if name not in _TOOLS:
        raise ToolError(f"there is no tool named {name!r}; the tools are {_listing()}")
    if not isinstance(arguments_json, str):
        raise ToolError(f"the arguments for {name} must be JSON text, got {arguments_json!r}")
    schema = _TOOLS[name][1]
    properties: dict[str, dict[str, Any]] = schema["properties"]
    try:
        raw = json.loads(arguments_json) if arguments_json.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"the arguments for {name} are not valid JSON ({exc.msg} at character "
            f"{exc.pos}); send one JSON object"
        ) from None
    if not isinstance(raw, dict):
        raise ToolError(f"the arguments for {name} must be a JSON object, got {_json_type(raw)}")
    args: dict[str, Any] = {}
    for field, value in raw.items():
        if field not in properties:
            known = ", ".join(properties) or "none"
            raise ToolError(f"{name} has no parameter {field!r}; its parameters are: {known}")
        if value is None and field not in schema["required"]:
            continue
        args[field] = _check_value(name, field, properties[field], value)
    for field in schema["required"]:
        if field not in args:
            raise ToolError(f"{name} needs the parameter {field!r}, which is missing")
    return args


def run_file_tool(ws: Workspace, name: str, args: Mapping[str, Any]) -> str:
    """Run the file tool ``name`` with arguments from ``parse_arguments``.

    Raises:
        ToolError: ``name`` is not a file tool, or the tool refused.
    """
    if name == "read_file":
        return read_file(
            ws, args["path"], offset=args.get("offset", 0), limit=args.get("limit", MAX_READ_BYTES)
        )
    if name == "write_file":
        return write_file(ws, args["path"], args["content"])
    if name == "edit_file":
        return edit_file(
            ws, args["path"], args["old"], args["new"], replace_all=args.get("replace_all", False)
        )
    if name == "list_dir":
        return list_dir(ws, args.get("path", "."))
    raise ToolError(
        f"{name!r} is not a file tool; run_file_tool runs only {', '.join(FILE_TOOL_NAMES)}"
    )


def _check_value(tool: str, field: str, spec: Mapping[str, Any], value: Any) -> Any:
    kind: str = spec["type"]
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)
    wrong_bool = isinstance(value, bool) and kind != "boolean"
    if wrong_bool or not isinstance(value, _JSON_TYPES[kind]):
        article = "an" if kind[0] in "aeiou" else "a"
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else f"{shown[:37]}..."
        raise ToolError(
            f"{tool}: the parameter {field!r} must be {article} {kind}, "
            f"got {shown} ({_json_type(value)})"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{tool}: the parameter {field!r} must be a finite number, got {value}")
    if "minimum" in spec and value < spec["minimum"]:
        raise ToolError(
            f"{tool}: the parameter {field!r} must be at least {spec['minimum']}, got {value}"
        )
    if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
        raise ToolError(
            f"{tool}: the parameter {field!r} must be more than "
            f"{spec['exclusiveMinimum']}, got {value}"
        )
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _listing() -> str:
    return ", ".join(TOOL_NAMES)
