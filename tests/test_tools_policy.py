"""The approval policy, and the registry that shows the model its tools and checks its calls."""

from __future__ import annotations

import pytest

from callboard.errors import ToolError
from callboard.tools import (
    DEFAULT_APPROVAL_POLICY,
    FILE_TOOL_NAMES,
    TOOL_NAMES,
    ApprovalPolicy,
    parse_arguments,
    tool_schemas,
)


class TestApprovalPolicy:
    def test_the_default_asks_before_changing_things_and_reads_at_once(self) -> None:
        assert {name: DEFAULT_APPROVAL_POLICY.for_tool(name) for name in TOOL_NAMES} == {
            "read_file": "always",
            "write_file": "ask",
            "edit_file": "ask",
            "list_dir": "always",
            "shell_run": "ask",
            "job_output": "always",
            "job_list": "always",
            "job_stop": "ask",
        }

    def test_a_tool_the_default_does_not_know_is_asked_about(self) -> None:
        assert DEFAULT_APPROVAL_POLICY.for_tool("some_future_tool") == "ask"

    def test_a_single_word_applies_to_every_tool(self) -> None:
        policy = ApprovalPolicy.from_json("never")
        assert {policy.for_tool(name) for name in TOOL_NAMES} == {"never"}

    def test_a_star_entry_covers_every_tool_not_named(self) -> None:
        policy = ApprovalPolicy.from_json({"*": "always", "shell_run": "ask"})
        assert policy.for_tool("shell_run") == "ask"
        assert {policy.for_tool(n) for n in TOOL_NAMES if n != "shell_run"} == {"always"}

    def test_a_mapping_without_a_star_keeps_the_default_for_the_tools_it_does_not_name(
        self,
    ) -> None:
        policy = ApprovalPolicy.from_json({"shell_run": "never"})
        assert policy.for_tool("shell_run") == "never"
        assert policy.for_tool("read_file") == "always"
        assert policy.for_tool("write_file") == "ask"

    def test_a_single_word_round_trips_through_json_as_that_word(self) -> None:
        policy = ApprovalPolicy.from_json("always")
        assert policy.to_json() == "always"
        assert ApprovalPolicy.from_json(policy.to_json()) == policy

    def test_the_default_round_trips_through_json(self) -> None:
        assert DEFAULT_APPROVAL_POLICY.to_json() == {
            "*": "ask",
            "edit_file": "ask",
            "job_list": "always",
            "job_output": "always",
            "job_stop": "ask",
            "list_dir": "always",
            "read_file": "always",
            "shell_run": "ask",
            "write_file": "ask",
        }
        assert ApprovalPolicy.from_json(DEFAULT_APPROVAL_POLICY.to_json()) == (
            DEFAULT_APPROVAL_POLICY
        )

    def test_a_mapping_round_trips_through_json_whatever_its_order(self) -> None:
        first = ApprovalPolicy.from_json({"*": "never", "write_file": "ask", "list_dir": "always"})
        second = ApprovalPolicy.from_json({"list_dir": "always", "write_file": "ask", "*": "never"})
        assert first == second
        assert hash(first) == hash(second)
        assert first.to_json() == {"*": "never", "list_dir": "always", "write_file": "ask"}
        assert ApprovalPolicy.from_json(first.to_json()) == first

    def test_an_unknown_word_is_refused_naming_it(self) -> None:
        with pytest.raises(
            ValueError, match=r"^the approval policy 'sometimes' is not 'always', 'ask' or 'never'$"
        ):
            ApprovalPolicy.from_json("sometimes")

    def test_a_bad_approval_for_a_tool_is_refused_naming_the_tool_and_the_value(self) -> None:
        with pytest.raises(
            ValueError,
            match=r"^the approval for tool 'shell_run' is 'yes'; expected 'always', 'ask' or",
        ):
            ApprovalPolicy.from_json({"shell_run": "yes"})

    def test_a_bad_approval_for_the_star_is_refused_naming_it(self) -> None:
        with pytest.raises(ValueError, match=r"^the approval for '\*' is 1; expected 'always'"):
            ApprovalPolicy.from_json({"*": 1})

    def test_a_misspelt_tool_name_is_refused_rather_than_ignored(self) -> None:
        with pytest.raises(
            ValueError,
            match=r"^the approval policy names the tool 'shel_run', which does not exist; ",
        ):
            ApprovalPolicy.from_json({"shel_run": "never"})

    def test_a_value_that_is_neither_a_word_nor_a_mapping_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"^an approval policy is one of .* got \['ask'\]$"):
            ApprovalPolicy.from_json(["ask"])

    def test_a_policy_cannot_be_changed_after_it_is_built(self) -> None:
        with pytest.raises(AttributeError):
            DEFAULT_APPROVAL_POLICY.default = "always"  # type: ignore[misc]


class TestToolSchemas:
    def test_every_tool_is_an_openai_function_with_an_object_schema(self) -> None:
        schemas = tool_schemas()
        assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
        assert len(schemas) == 8
        for schema in schemas:
            assert schema["type"] == "function"
            assert set(schema["function"]) == {"name", "description", "parameters"}
            assert schema["function"]["parameters"]["type"] == "object"
            assert schema["function"]["parameters"]["additionalProperties"] is False

    def test_each_tool_requires_exactly_what_it_cannot_run_without(self) -> None:
        required = {
            s["function"]["name"]: s["function"]["parameters"]["required"] for s in tool_schemas()
        }
        assert required == {
            "read_file": ["path"],
            "write_file": ["path", "content"],
            "edit_file": ["path", "old", "new"],
            "list_dir": [],
            "shell_run": ["command"],
            "job_output": ["job_id"],
            "job_list": [],
            "job_stop": ["job_id"],
        }

    def test_shell_run_takes_a_command_an_optional_timeout_and_background(self) -> None:
        (shell_run,) = tool_schemas(["shell_run"])
        properties = shell_run["function"]["parameters"]["properties"]
        assert {name: spec["type"] for name, spec in properties.items()} == {
            "command": "string",
            "timeout": "number",
            "background": "boolean",
        }

    def test_a_subset_comes_back_in_the_order_asked(self) -> None:
        names = [s["function"]["name"] for s in tool_schemas(reversed(FILE_TOOL_NAMES))]
        assert names == ["list_dir", "edit_file", "write_file", "read_file"]

    def test_changing_a_returned_schema_does_not_change_the_next_one(self) -> None:
        tool_schemas()[0]["function"]["parameters"]["required"].append("oops")
        assert tool_schemas()[0]["function"]["parameters"]["required"] == ["path"]

    def test_an_unknown_tool_name_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"^there is no tool named 'rm_rf'; the tools are "):
            tool_schemas(["rm_rf"])


class TestParseArguments:
    def test_valid_arguments_come_back_as_given(self) -> None:
        assert parse_arguments("read_file", '{"path": "a.txt", "offset": 10}') == {
            "path": "a.txt",
            "offset": 10,
        }

    def test_a_missing_required_field_is_refused_naming_the_tool_and_the_field(self) -> None:
        with pytest.raises(
            ToolError, match=r"^write_file needs the parameter 'content', which is missing$"
        ):
            parse_arguments("write_file", '{"path": "a.txt"}')

    def test_a_field_of_the_wrong_type_is_refused_saying_what_was_expected(self) -> None:
        with pytest.raises(
            ToolError,
            match=r"^shell_run: the parameter 'command' must be a string, got \[\"ls\"\] \(an ",
        ):
            parse_arguments("shell_run", '{"command": ["ls"]}')

    def test_a_boolean_is_not_taken_for_an_integer(self) -> None:
        with pytest.raises(
            ToolError,
            match=r"^read_file: the parameter 'offset' must be an integer, got true \(a boolean\)$",
        ):
            parse_arguments("read_file", '{"path": "a", "offset": true}')

    def test_a_whole_number_float_is_taken_for_an_integer(self) -> None:
        assert parse_arguments("job_output", '{"job_id": "j1", "offset": 5.0}') == {
            "job_id": "j1",
            "offset": 5,
        }

    def test_a_value_below_the_minimum_is_refused(self) -> None:
        with pytest.raises(
            ToolError, match=r"^shell_run: the parameter 'timeout' must be more than 0, got -1$"
        ):
            parse_arguments("shell_run", '{"command": "ls", "timeout": -1}')

    def test_a_field_the_tool_does_not_have_is_refused_listing_the_ones_it_has(self) -> None:
        with pytest.raises(
            ToolError,
            match=r"^job_stop has no parameter 'signal'; its parameters are: job_id$",
        ):
            parse_arguments("job_stop", '{"job_id": "j1", "signal": 9}')

    def test_a_null_optional_field_counts_as_absent(self) -> None:
        assert parse_arguments("list_dir", '{"path": null}') == {}

    def test_a_null_required_field_is_refused(self) -> None:
        with pytest.raises(
            ToolError, match=r"^job_stop: the parameter 'job_id' must be a string, got null"
        ):
            parse_arguments("job_stop", '{"job_id": null}')

    def test_empty_arguments_count_as_an_empty_object(self) -> None:
        assert parse_arguments("job_list", "") == {}

    def test_arguments_that_are_not_json_are_refused_naming_the_tool(self) -> None:
        with pytest.raises(ToolError, match=r"^the arguments for read_file are not valid JSON \("):
            parse_arguments("read_file", '{"path": ')

    def test_arguments_that_are_not_an_object_are_refused(self) -> None:
        with pytest.raises(
            ToolError, match=r"^the arguments for read_file must be a JSON object, got an array$"
        ):
            parse_arguments("read_file", '["a.txt"]')

    def test_a_number_that_is_not_finite_is_refused(self) -> None:
        with pytest.raises(
            ToolError, match=r"^shell_run: the parameter 'timeout' must be a finite number"
        ):
            parse_arguments("shell_run", '{"command": "ls", "timeout": Infinity}')

    def test_an_unknown_tool_is_refused(self) -> None:
        with pytest.raises(ToolError, match=r"^there is no tool named 'rm_rf'; the tools are "):
            parse_arguments("rm_rf", "{}")
