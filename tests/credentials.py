"""The operator token of the test servers that run in this process.

`tests/conftest.py` puts it in ``$CALLBOARD_TOKEN`` for every test, so the
Python client and the CLI present it as a user's environment would; the
in-process gateways are made with it (``GatewayConfig(token=TEST_TOKEN)``).
A `callboard serve` subprocess makes its own in its data directory instead.
"""

TEST_TOKEN = "test-operator-token"
