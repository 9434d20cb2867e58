"""Every ``python`` example in README.md (and docs/agents.md, where the README's
agent sections keep their longer examples) runs as printed.

The blocks are read from the documents themselves (no copy lives here), each is
written to an empty directory and run there as a real Python process, with
``$CALLBOARD_MODEL_URL`` pointing at the scripted model on loopback (the
examples that need a model read it from there, as the README shows).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import trio
from scripted_model import ScriptedModel, text, tool_call

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
DOCUMENTS = ("README.md", "docs/agents.md")
EXAMPLES = [code for doc in DOCUMENTS for code in BLOCK.findall((REPO / doc).read_text())]


def _name(code: str) -> str:
    """A test id: the first line that defines or awaits something."""
    for line in code.splitlines():
        if line.startswith(("class ", "async def ")):
            return line.split("(")[0].split(":")[0].replace(" ", "-")
    return "example"


def _environment(model_url: str) -> dict[str, str]:
    """This environment without callboard's own variables, importing the callboard under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLBOARD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["CALLBOARD_MODEL_URL"] = model_url
    return env


def test_the_readme_has_the_embedding_examples():
    assert len(EXAMPLES) >= 2
    assert any("rt.tasks.spawn" in code for code in EXAMPLES)
    assert any("class Counter" in code for code in EXAMPLES)


@pytest.mark.parametrize("code", EXAMPLES, ids=[_name(code) for code in EXAMPLES])
async def test_a_readme_example_runs_as_printed(tmp_path, code):
    (tmp_path / "example.py").write_text(code)
    # A model that writes the note it is asked for, then says so.
    write = tool_call("write_file", {"path": "NOTES.md", "content": "# Notes\n"})
    with ScriptedModel([write, text("NOTES.md is written")]) as model, trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "example.py"], cwd=tmp_path, env=_environment(model.base_url),
            capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    stdout = done.stdout.decode().splitlines()
    assert (done.returncode, done.stderr.decode()) == (0, "")
    if "rt.tasks.spawn" in code:
        if "max_tokens=" in code:  # the budget's: what the task spent comes first
            spent = stdout.pop(0)
            assert spent == (
                "{'input_tokens': 14, 'output_tokens': 10, 'model_calls': 2, 'tool_calls': 1, "
                "'cost': 0.0}"
            )
        assert stdout == ["Succeeded(result='NOTES.md is written')"]
        assert (tmp_path / "ws" / "NOTES.md").read_text() == "# Notes\n"
        assert len(model.requests) == 2
    elif "class Counter" in code:
        assert "state={'total': 1}" in stdout[0]
        assert stdout[1:] == ["1 actor.started {}"]
        assert model.requests == []
