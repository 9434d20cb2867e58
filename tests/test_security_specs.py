"""A spec cannot widen what the host allows: workspaces stay under the roots, model
URLs and key variables are the operator's to allow, and the server's key goes only
to the configured model URL."""

from __future__ import annotations

import pytest
import trio
from scripted_model import ScriptedModel, text
from session_helpers import Watch

import callboard
from callboard.agent import Session, Task

KINDS = [Session, Task]


def _spec(workspace, **fields):
    return {"workspace": str(workspace), "approvals": "always", **fields}


async def _spawn(tmp_path, settings, spec, kind="session"):
    """The address spawned, or the error raised (raised here, outside the runtime's
    nursery, so that it is not wrapped in a group)."""
    async with callboard.open_runtime(tmp_path / "data", kinds=KINDS, settings=settings) as rt:
        try:
            address = await rt.spawn(kind, spec, "s1")
        except callboard.CallboardError as exc:
            refused = exc
        else:
            return address
    raise refused


async def test_a_workspace_outside_every_root_is_refused_naming_the_roots_and_the_setting(
    tmp_path, workspace
):
    root = tmp_path / "allowed"
    root.mkdir()
    settings = {"workspace_roots": [str(root)]}
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused) as refused:
        await _spawn(tmp_path, settings, _spec(workspace))
    assert str(refused.value) == (
        f"the workspace {str(workspace)!r} is outside every workspace root ({str(root)!r}); "
        "pick a directory under one, or have the operator add a root with --workspace-root DIR"
    )


async def test_a_workspace_under_a_root_is_allowed_and_a_link_out_of_it_is_not(tmp_path):
    root = tmp_path / "allowed"
    (root / "ws").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    settings = {"workspace_roots": [str(root)]}
    with trio.fail_after(10):
        assert await _spawn(tmp_path, settings, _spec(root / "ws")) == "session/s1"
        with pytest.raises(callboard.SpecRefused, match="outside every workspace root"):
            await _spawn(tmp_path / "second", settings, _spec(root / "out"))


@pytest.mark.parametrize("roots", [None, ["/tmp"]], ids=["no-roots", "other-roots"])
async def test_the_root_directory_is_never_a_workspace_unless_the_operator_names_it(
    tmp_path, roots
):
    settings = {"workspace_roots": roots}
    with trio.fail_after(10):
        with pytest.raises(callboard.SpecRefused, match=r"--workspace-root /"):
            await _spawn(tmp_path, settings, _spec("/"))
        assert await _spawn(tmp_path / "b", {"workspace_roots": ["/"]}, _spec("/")) == "session/s1"


async def test_a_workspace_inside_the_data_directory_is_refused(tmp_path):
    inside = tmp_path / "data" / "jobs"
    inside.mkdir(parents=True)
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused, match="data directory"):
        await _spawn(tmp_path, {}, _spec(inside))


async def test_a_task_workspace_is_held_to_the_roots_too(tmp_path, workspace):
    settings = {"workspace_roots": [str(tmp_path / "elsewhere")]}
    spec = {"prompt": "go", "workspace": str(workspace)}
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused, match="--workspace-root"):
        await _spawn(tmp_path, settings, spec, kind="task")


async def test_a_model_url_the_operator_did_not_allow_is_refused_naming_the_setting(
    tmp_path, workspace
):
    settings = {"model_url": "http://127.0.0.1:9/v1", "allowed_model_urls": []}
    spec = _spec(workspace, base_url="http://attacker.example/v1")
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused) as refused:
        await _spawn(tmp_path, settings, spec)
    assert str(refused.value) == (
        "the model URL 'http://attacker.example/v1' is not allowed: a spec may name the "
        "configured --model-url or one allowed with --allow-model-url (now: "
        "'http://127.0.0.1:9/v1')"
    )


async def test_a_key_variable_the_operator_did_not_allow_is_refused_naming_the_setting(
    tmp_path, workspace
):
    spec = _spec(workspace, api_key_env="CALLBOARD_TOKEN")
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused) as refused:
        await _spawn(tmp_path, {"allowed_key_envs": ["OTHER_KEY"]}, spec)
    assert "allow it with --allow-key-env CALLBOARD_TOKEN" in str(refused.value)


async def _one_turn(tmp_path, settings, spec) -> None:
    async with callboard.open_runtime(tmp_path / "data", kinds=KINDS, settings=settings) as rt:
        await rt.spawn("session", spec, "s1")
        async with rt.subscribe("session/s1", after=0) as sub:
            await rt.send("session/s1", "prompt", {"text": "hi"})
            await Watch(sub).until("turn.completed")


async def test_the_servers_key_goes_to_the_configured_model_url_and_to_no_other(
    tmp_path, workspace, monkeypatch
):
    monkeypatch.setenv("CALLBOARD_API_KEY", "server-key")
    with ScriptedModel([text("a")]) as configured, ScriptedModel([text("b")]) as other:
        settings = {
            "model_url": configured.base_url,
            "model": "m",
            "allowed_model_urls": [other.base_url],
        }
        with trio.fail_after(20):
            await _one_turn(tmp_path / "one", settings, _spec(workspace))
            await _one_turn(tmp_path / "two", settings, _spec(workspace, base_url=other.base_url))
        (to_configured,) = configured.request_headers
        (to_other,) = other.request_headers
    assert to_configured["authorization"] == "Bearer server-key"
    assert "authorization" not in to_other


async def test_an_allowed_key_variable_is_sent_to_the_url_of_the_spec(
    tmp_path, workspace, monkeypatch
):
    monkeypatch.setenv("CALLBOARD_API_KEY", "server-key")
    monkeypatch.setenv("TEAM_KEY", "team-key")
    with ScriptedModel([text("b")]) as other:
        settings = {"allowed_model_urls": [other.base_url], "allowed_key_envs": ["TEAM_KEY"]}
        spec = _spec(workspace, base_url=other.base_url, model="m", api_key_env="TEAM_KEY")
        with trio.fail_after(20):
            await _one_turn(tmp_path, settings, spec)
        (headers,) = other.request_headers
    assert headers["authorization"] == "Bearer team-key"


async def test_an_ssh_executor_to_a_host_the_operator_did_not_allow_is_refused(tmp_path, workspace):
    spec = _spec(workspace, executor={"ssh": {"host": "elsewhere.example"}})
    settings = {"allowed_ssh_hosts": ["build.example"]}
    with trio.fail_after(10), pytest.raises(callboard.SpecRefused) as refused:
        await _spawn(tmp_path, settings, spec)
    assert str(refused.value) == (
        "the executor's ssh host 'elsewhere.example' is not allowed: the operator allows "
        "hosts with --allow-ssh-host HOST (now: 'build.example')"
    )
    allowed = _spec(workspace, executor={"ssh": {"host": "build.example"}})
    with trio.fail_after(10):
        assert await _spawn(tmp_path / "b", settings, allowed) == "session/s1"


async def test_a_task_spec_checks_its_executors_shape_and_the_host_refuses_what_it_cannot_run(
    tmp_path, workspace
):
    """`RunSpec` is shared with the client, so it checks only the executor's shape;
    what the host will not run (an ssh option that runs commands here) is refused
    at spawn, before the spec is stored."""
    with pytest.raises(TypeError, match=r"^'executor': a job executor is None or"):
        callboard.RunSpec("p", executor={"ssh": {}})
    with pytest.raises(TypeError, match=r"^'executor': an ssh executor takes host, .*'env'"):
        callboard.RunSpec("p", executor={"ssh": {"host": "h", "env": {}}})
    executor = {"ssh": {"host": "127.0.0.1", "options": ["ProxyCommand=touch pwned"]}}
    spec = {"prompt": "p", "workspace": str(workspace), "executor": executor}
    assert callboard.RunSpec("p", executor=executor).executor == executor
    with trio.fail_after(10), pytest.raises(callboard.BadRequest) as refused:
        await _spawn(tmp_path, {}, spec, kind="task")
    assert str(refused.value).startswith(
        "the spec's 'executor': ssh option 'ProxyCommand' is not allowed"
    )
    async with callboard.open_runtime(tmp_path / "data", kinds=KINDS) as rt:
        assert await rt.list(kind="task") == []
    assert not (tmp_path / "pwned").exists()
