"""Every package's public names: exported once, listed in a sorted, complete ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import callboard

PACKAGES = [
    *sorted(
        name
        for _, name, is_pkg in pkgutil.walk_packages(callboard.__path__, "callboard.")
        if is_pkg and not name.rsplit(".", 1)[1].startswith("_")
    ),
    "callboard",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_lists_every_public_name_it_exports_in_a_sorted_all(name):
    module = importlib.import_module(name)
    exported = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, type(module))
        and getattr(value, "__module__", "callboard").startswith("callboard")
        and attr not in {"annotations", "TYPE_CHECKING"}
    }
    assert module.__all__ == sorted(module.__all__, key=_isort_style)
    assert exported <= set(module.__all__), "public but missing from __all__"
    assert all(hasattr(module, attr) for attr in module.__all__)
    assert len(set(module.__all__)) == len(module.__all__)


def _isort_style(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_the_embedding_api_names_from_the_design_exist():
    for name in ("Actor", "Context", "Message", "open_runtime", "Supervision", "Ack", "Event"):
        assert name in callboard.__all__
