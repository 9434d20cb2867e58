"""The model wires a test runs over: ``openai``, then ``anthropic``.

A module that sets ``pytestmark = pytest.mark.parametrize("wire", WIRES)``
runs each test once per wire, against a ``ScriptedModel(..., wire=wire)``
and a spec with the model's ``provider``: the same turn, the same
assertions (on ``model.chat_requests``, one shape for both), either provider.
"""

from __future__ import annotations

WIRES = ("openai", "anthropic")
