"""Errors keep their type across a pickle and across the wire: a remote caller
catches the class a local one would."""

from __future__ import annotations

import pickle

import pytest
import trio
from client_helpers import serving

import callboard
from callboard import errors
from callboard.client import connect


def _instances() -> list[callboard.CallboardError]:
    made: list[callboard.CallboardError] = []
    for name in errors.__all__:
        cls = getattr(errors, name)
        if not (isinstance(cls, type) and issubclass(cls, callboard.CallboardError)):
            continue
        if cls is errors.Lagged:
            made.append(cls("counter/a", 7))
        elif cls is errors.Pruned:
            made.append(cls("counter/a", 9))
        elif cls is errors.ModelError:
            made.append(cls("the model said no", status=429, retryable=True))
        else:
            made.append(cls(f"a {name} for the test"))
    return made


@pytest.mark.parametrize("error", _instances(), ids=lambda e: type(e).__name__)
def test_every_callboard_error_survives_a_pickle_with_its_fields(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.__dict__ == error.__dict__


async def test_a_remote_caller_catches_the_class_the_runtime_raised(tmp_path):
    with trio.fail_after(10):
        async with serving(tmp_path) as server:
            async with connect(server.url) as client:
                await client.spawn("box", {"size": 1}, name="b")
                with pytest.raises(callboard.SpawnConflict):
                    await client.spawn("box", {"size": 2}, name="b")
                await client.stop("box/b")
                with pytest.raises(callboard.ActorStopped):
                    await client.send("box/b", "put")
