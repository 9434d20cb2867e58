"""The ssh options a spec may set: an allowlist, because most others run commands here.

An ssh executor's description comes from a session's or task's spec, so
from the caller, and each option becomes ``ssh -o KEY=VALUE`` in a process
on this machine. OpenSSH reads many options as programs to run or files
to load on the client (``ProxyCommand=sh -c '...'`` is a shell for
whoever writes the spec), so only options that tune the connection pass.

Pure: no trio, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from callboard.errors import ToolError

__all__ = ["SSH_OPTIONS", "validate_ssh_options"]

#: The ``-o`` options a spec may give an ssh executor. Each only tunes the
#: connection. Left out on purpose: every option that runs a program here
#: (ProxyCommand, LocalCommand, KnownHostsCommand, Match exec, XAuthLocation),
#: loads code or config (PKCS11Provider, SecurityKeyProvider, Include), hands
#: this machine's keys, agent or ports to the far side (IdentityFile,
#: ForwardAgent, RemoteForward, ControlPath...), sends its environment
#: (SendEnv) or rewrites files here (UpdateHostKeys).
SSH_OPTIONS: tuple[str, ...] = (
    "AddressFamily",
    "CheckHostIP",
    "Ciphers",
    "Compression",
    "ConnectionAttempts",
    "ConnectTimeout",
    "GlobalKnownHostsFile",
    "HashKnownHosts",
    "HostKeyAlgorithms",
    "HostKeyAlias",
    "IdentitiesOnly",
    "IPQoS",
    "KexAlgorithms",
    "LogLevel",
    "MACs",
    "PubkeyAcceptedAlgorithms",
    "RekeyLimit",
    "ServerAliveCountMax",
    "ServerAliveInterval",
    "SetEnv",
    "StrictHostKeyChecking",
    "TCPKeepAlive",
    "UserKnownHostsFile",
    "VerifyHostKeyDNS",
)
_SSH_OPTION_KEYS = {key.lower(): key for key in SSH_OPTIONS}
_SSH_OPTION = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(.*)", re.DOTALL)
# With any other value ssh accepts an unknown host key and appends it to the
# known-hosts file, which a spec may point at any file here.
_STRICT_HOST_KEY_CHECKING = ("yes", "true", "ask")


def validate_ssh_options(options: Sequence[str]) -> tuple[str, ...]:
    """``options`` as a tuple, if each is ``Key=Value`` with a key in :data:`SSH_OPTIONS`.

    Raises:
        ToolError: an option is malformed, has a key that is not allowed, or
            turns off host key checking; the message names it.
    """
    if isinstance(options, str):
        raise ToolError(f"ssh options must be a list of Key=Value strings, got {options!r}")
    for option in options:
        match = _SSH_OPTION.fullmatch(option) if isinstance(option, str) else None
        if match is None:
            raise ToolError(f"ssh option {option!r} must look like Key=Value (it is passed as -o)")
        if any(ord(char) < 0x20 or char == "\x7f" for char in option):
            raise ToolError(f"ssh option {option!r} contains control characters")
        key, value = match.group(1), match.group(2)
        if key.lower() not in _SSH_OPTION_KEYS:
            raise ToolError(
                f"ssh option {key!r} is not allowed: it could run commands or reach files "
                f"on this machine. The allowed options are {', '.join(SSH_OPTIONS)}"
            )
        strict = key.lower() == "stricthostkeychecking"
        if strict and value.lower() not in _STRICT_HOST_KEY_CHECKING:
            raise ToolError(
                f"ssh option {option!r} is not allowed: StrictHostKeyChecking must stay yes, "
                "so an unknown host is refused (add its key to a known-hosts file instead)"
            )
    return tuple(options)
