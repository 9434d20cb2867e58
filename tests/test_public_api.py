"""Every package's public names: exported once, listed in a sorted, complete ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import callboard

PACKAGES = sorted(
    name
    for _, name, is_pkg in pkgutil.walk_packages(callboard.__path__, "callboard.")
    if is_pkg and not name.rsplit(".", 1)[1].startswith("_")
) + ["callboard"]


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_lists_every_public_name_it_exports_in_a_sorted_all(name):
    module = importlib.import_module(name)
    exported = sorted(
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, type(module))
        and attr not in {"annotations", "TYPE_CHECKING"}
    )
    assert module.__all__ == sorted(module.__all__)
    assert sorted(module.__all__) == exported


def test_the_embedding_api_names_from_the_design_exist():
    for name in ("Actor", "Context", "Message", "open_runtime", "Supervision", "Ack", "Event"):
        assert name in callboard.__all__
