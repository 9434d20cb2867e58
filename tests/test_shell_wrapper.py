"""The job wrapper as text: ids, paths and scripts, checked with the real ``/bin/sh -n``.

Nothing here runs a job; ``test_shell_run.py`` does. These pin what must hold
for *every* wrapper: it parses, the command travels only as base64, and the
pid and exit files are only ever written by rename.
"""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

from callboard.errors import ToolError
from callboard.tools._remote_scripts import build_stop_group_script, build_wait_exit_script
from callboard.tools._wrapper import (
    _CHILD,
    _MONITOR,
    JobFiles,
    build_wrapper,
    new_job_id,
    owner_dir,
    parse_exit_status,
    parse_pid,
    validate_job_id,
)

ROOT = Path("/var/lib/callboard/jobs")
FILES = JobFiles.for_job(owner_dir(ROOT, "session/s1"), "abc123abc123")
TRICKY = "git commit -m 'fix: it' && echo \"$HOME\" `date` \\\n  done; echo '\"'"


def sh_n(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-n"], input=script, capture_output=True, text=True)


def payload_of(wrapper: str) -> str:
    match = re.search(r"^printf '%s' (\S+) \| base64 -d", wrapper, re.MULTILINE)
    assert match is not None, wrapper
    return base64.b64decode(match.group(1)).decode("utf-8")


def test_a_fresh_job_id_is_a_valid_one() -> None:
    """new_job_id makes 12 hex digits that validate_job_id accepts."""
    job_id = new_job_id()
    assert validate_job_id(job_id) == job_id
    assert re.fullmatch(r"[0-9a-f]{12}", job_id)


@pytest.mark.parametrize(
    "job_id",
    ["../../etc/passwd", "", ".", "..", "a/b", "a b", "abc\n", "x" * 65, "é", None, 12],
)
def test_a_job_id_that_could_name_another_file_is_refused(job_id: object) -> None:
    """Ids come back from the model, so anything but [A-Za-z0-9_-]{1,64} is refused by name."""
    with pytest.raises(ToolError, match=re.escape(repr(job_id))):
        validate_job_id(job_id)


def test_job_files_refuse_an_id_with_a_path_in_it() -> None:
    """A JobFiles cannot be built around ../../etc/passwd."""
    with pytest.raises(ToolError, match="not valid"):
        JobFiles.for_job(ROOT, "../../etc/passwd")


def test_job_files_refuse_a_relative_directory() -> None:
    """Job files live at absolute paths, since the wrapper changes directory."""
    with pytest.raises(ToolError, match="absolute"):
        JobFiles.for_job(Path("jobs"), "abc")


def test_the_files_of_a_job_are_named_by_its_id_in_its_owners_directory() -> None:
    """ID.cmd, ID.box, ID.pid, ID.out, ID.exit and the two temporaries, nothing else."""
    names = [path.name for path in FILES.every_file]
    assert names == [
        "abc123abc123.cmd",
        "abc123abc123.box",
        "abc123abc123.pid",
        "abc123abc123.out",
        "abc123abc123.exit",
        "abc123abc123.pid.tmp",
        "abc123abc123.exit.tmp",
    ]
    assert {path.parent for path in FILES.every_file} == {ROOT / "session%2Fs1"}


@pytest.mark.parametrize(
    ("address", "name"),
    [
        ("session/s1", "session%2Fs1"),
        ("task/../../etc", "task%2F%2E%2E%2F%2E%2E%2Fetc"),
        ("session/a%2Fb", "session%2Fa%252Fb"),
        ("session/ü", "session%2F%C3%BC"),
    ],
)
def test_an_owner_address_becomes_one_safe_directory_under_the_root(
    address: str, name: str
) -> None:
    """No address climbs out of the root, and two addresses never share a directory."""
    assert owner_dir(ROOT, address) == ROOT / name


@pytest.mark.parametrize("address", ["", "session/\n", "session/\x00"])
def test_an_owner_address_that_is_empty_or_has_control_characters_is_refused(
    address: str,
) -> None:
    """An address no actor could have is refused rather than encoded."""
    with pytest.raises(ToolError, match="owner address"):
        owner_dir(ROOT, address)


def test_an_owner_address_too_long_for_a_directory_name_is_refused() -> None:
    """File names stop at 255 bytes; the encoded name must fit with room to spare."""
    with pytest.raises(ToolError, match="too long"):
        owner_dir(ROOT, "session/" + "é" * 100)


def test_the_command_travels_base64_encoded_and_never_as_shell_text() -> None:
    """`git commit -m 'fix'` would shatter a quoted string; it is not in the wrapper at all."""
    wrapper = build_wrapper(TRICKY, FILES, cwd=Path("/work"))
    assert "git commit" not in wrapper
    assert payload_of(wrapper) == TRICKY


def test_a_sandbox_script_travels_base64_encoded_beside_the_command() -> None:
    """ID.box is decoded like ID.cmd, and the wrapper still parses."""
    box = "exec bwrap --ro-bind / / -- /bin/sh '/run/callboard/job.sh'\n"
    wrapper = build_wrapper(TRICKY, FILES, cwd=Path("/work"), box=box)
    written = re.findall(r"^printf '%s' (\S+) \| base64 -d >\"\$d/\$id\.(\w+)\"", wrapper, re.M)
    assert [(name, base64.b64decode(data).decode()) for data, name in written] == [
        ("cmd", TRICKY),
        ("box", box),
    ]
    assert "bwrap" not in wrapper
    checked = sh_n(wrapper)
    assert checked.returncode == 0, f"{checked.stderr}\n{wrapper}"


def test_without_a_sandbox_no_box_file_is_written() -> None:
    """The child prelude then finds no ID.box and runs ID.cmd itself."""
    assert '>"$d/$id.box"' not in build_wrapper("true", FILES, cwd=Path("/"))


@settings(max_examples=60, deadline=None)
@given(
    command=st.text(st.characters(exclude_categories=["Cs"]), max_size=300),
    job_id=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    directory=st.text(
        st.characters(exclude_categories=["Cs"], exclude_characters="\0"), min_size=1, max_size=30
    ),
)
def test_every_generated_wrapper_passes_sh_n(command: str, job_id: str, directory: str) -> None:
    """Any command, id and directory name (quotes, newlines, $, spaces) makes valid shell."""
    files = JobFiles.for_job(Path("/jobs") / directory.replace("/", "_"), job_id)
    wrapper = build_wrapper(command, files, cwd=Path("/tmp") / directory.replace("/", "_"))
    checked = sh_n(wrapper)
    assert checked.returncode == 0, f"{checked.stderr}\n{wrapper}"
    assert payload_of(wrapper) == command


def test_the_monitor_and_the_child_prelude_pass_sh_n() -> None:
    """The two scripts inside the wrapper's quotes parse on their own too."""
    for script in (_MONITOR, _CHILD):
        checked = sh_n(script)
        assert checked.returncode == 0, f"{checked.stderr}\n{script}"
        assert "'" not in script, "a single quote would end the wrapper's quoting"


def test_the_remote_stop_and_wait_scripts_pass_sh_n() -> None:
    """The scripts an ssh executor sends parse, with and without a start time."""
    scripts = [
        build_stop_group_script(4242, grace=2.0, kill_wait=5.0),
        build_wait_exit_script(FILES, 4242, start_time=None, seconds=60, gone_wait=2),
        build_wait_exit_script(FILES, 4242, start_time=123456, seconds=0.1, gone_wait=2),
    ]
    for script in scripts:
        checked = sh_n(script)
        assert checked.returncode == 0, f"{checked.stderr}\n{script}"


def test_a_stop_script_for_init_or_every_process_is_refused() -> None:
    """kill -- -1 would signal every process; -0 the caller's own group."""
    for pgid in (-1, 0, 1):
        with pytest.raises(ToolError, match=f"process group {pgid}"):
            build_stop_group_script(pgid, grace=1.0, kill_wait=1.0)


def test_the_pid_and_exit_files_are_only_ever_written_by_rename() -> None:
    """Both are written to ID.*.tmp and moved into place, so no reader sees half a number."""
    wrapper = build_wrapper("true", FILES, cwd=Path("/"))
    assert re.findall(r'>"\$d/\$id\.(\w+(?:\.tmp)?)"', wrapper) == [
        "cmd",
        "exit.tmp",
        "pid.tmp",
        "out",
    ]
    assert 'mv -f "$d/$id.pid.tmp" "$d/$id.pid"' in wrapper
    assert 'mv -f "$d/$id.exit.tmp" "$d/$id.exit"' in wrapper


def test_an_exit_status_without_its_final_newline_is_not_read() -> None:
    """Only digits and a newline make a status; a partial write reads as no status."""
    assert parse_exit_status("3\n") == 3
    assert parse_exit_status("0\n") == 0
    assert parse_exit_status("3") is None
    assert parse_exit_status("") is None
    assert parse_exit_status(None) is None
    assert parse_exit_status("3\n4\n") is None


def test_a_pid_file_must_hold_one_plausible_pid() -> None:
    """Pids 0 and 1 would signal far more than a job, so they never parse."""
    assert parse_pid("4242\n") == 4242
    assert parse_pid("1\n") is None
    assert parse_pid("0\n") is None
    assert parse_pid("-5\n") is None
    assert parse_pid("42") is None


def test_a_command_that_is_not_valid_text_is_refused() -> None:
    """A lone surrogate cannot be encoded, so it is refused with a reason."""
    with pytest.raises(ToolError, match="not valid text"):
        build_wrapper("echo \udc80", FILES, cwd=Path("/"))
