"""``serve --prices FILE``: the operator's per-model prices, per token, for ``max_cost``.

The file is JSON of the shape a spec's ``prices`` has, ``{"MODEL": {"input":
PRICE, "output": PRICE}}``; a spec's own prices win over it for the models
they name. Read and checked when serve starts, so a typo stops it with the
file and the problem named instead of refusing every spawn later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..views import prices_problem

__all__ = ["read_prices"]


def read_prices(path: str | None) -> dict[str, Any] | None:
    """The price table in ``path`` (None for none); ValueError naming the file and what
    is wrong with it."""
    if path is None:
        return None
    try:
        table = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"--prices {path}: cannot read it ({exc.strerror})") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"--prices {path}: not JSON ({exc})") from None
    problem = prices_problem(table)
    if problem is not None:
        raise ValueError(f"--prices {path}: the table {problem}")
    return dict(table)
