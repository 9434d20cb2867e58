"""Shared test set-up: unwrap trio's single-error groups so failures read plainly."""

from __future__ import annotations

import pytest


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        return (yield)
    except BaseExceptionGroup as group:
        inner = _unwrap(group)
        if inner is group:
            raise
        raise inner from None


def pytest_addoption(parser):
    parser.addoption(
        "--longrun",
        action="store_true",
        default=False,
        help="run the crash tests for hundreds of iterations",
    )
