"""The pure halves of callboard.llm: server-sent events decoding and chunk accumulation.

No sockets and no trio here: these modules take bytes, lines and dicts.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callboard.errors import ModelError
from callboard.llm import (
    AssistantReply,
    ChunkAccumulator,
    EventStreamDecoder,
    ServerSentEvent,
    ToolCall,
    accumulate,
    iter_events,
)

STREAM = (
    ": keep-alive\n"
    "\n"
    'data: {"a": 1}\n'
    "\n"
    "event: note\n"
    "id: 7\n"
    "data: first line\n"
    "data: second line\n"
    "\n"
    "data: [DONE]\n"
    "\n"
)
EVENTS = [
    ServerSentEvent(data='{"a": 1}'),
    ServerSentEvent(data="first line\nsecond line", event="note", id="7"),
    ServerSentEvent(data="[DONE]", id="7"),
]


def decode_whole(data: bytes) -> list[ServerSentEvent]:
    decoder = EventStreamDecoder()
    return decoder.feed(data) + decoder.close()


def chunk(delta: dict | None = None, finish_reason: str | None = None, **extra: object) -> dict:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"object": "chat.completion.chunk", "choices": [choice], **extra}


def call_delta(index: int, **fields: object) -> dict:
    return chunk({"tool_calls": [{"index": index, **fields}]})


def test_lf_separated_events_are_decoded_in_order_with_their_fields():
    assert decode_whole(STREAM.encode()) == EVENTS


def test_crlf_line_endings_decode_the_same_events_as_lf():
    assert decode_whole(STREAM.replace("\n", "\r\n").encode()) == EVENTS


def test_a_lone_cr_also_ends_a_line():
    assert decode_whole(STREAM.replace("\n", "\r").encode()) == EVENTS


def test_comment_lines_produce_no_event():
    assert decode_whole(b": one\n: two\n\n:three\n\n") == []


def test_multi_line_data_is_joined_with_newlines():
    assert decode_whole(b"data: a\ndata:\ndata: c\n\n") == [ServerSentEvent(data="a\n\nc")]


def test_only_one_space_after_the_colon_is_removed():
    assert decode_whole(b"data:no space\n\ndata:   three\n\n") == [
        ServerSentEvent(data="no space"),
        ServerSentEvent(data="  three"),
    ]


def test_the_done_sentinel_is_an_event_that_says_it_is_done():
    events = decode_whole(b'data: {"x": 1}\n\ndata: [DONE]\n\n')
    assert [event.is_done for event in events] == [False, True]


def test_a_blank_line_without_data_dispatches_nothing():
    assert decode_whole(b"event: lonely\n\n\n\n") == []


def test_a_crlf_split_across_two_chunks_ends_only_one_line():
    decoder = EventStreamDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r\n") == [ServerSentEvent(data="a")]
    assert decoder.close() == []


def test_a_multibyte_character_split_across_chunks_is_decoded_whole():
    data = 'data: "héllo"\n\n'.encode()
    cut = data.index(b"\xc3") + 1
    decoder = EventStreamDecoder()
    events = decoder.feed(data[:cut]) + decoder.feed(data[cut:]) + decoder.close()
    assert events == [ServerSentEvent(data='"héllo"')]


def test_a_u2028_inside_data_does_not_split_the_line():
    data = 'data: {"content": "a\u2028b\u0085c"}\n\n'.encode()
    assert decode_whole(data) == [ServerSentEvent(data='{"content": "a\u2028b\u0085c"}')]


def test_a_last_event_without_its_blank_line_is_delivered_on_close():
    assert decode_whole(b"data: [DONE]") == [ServerSentEvent(data="[DONE]")]


def test_a_leading_byte_order_mark_is_skipped():
    assert decode_whole("\ufeffdata: x\n\n".encode()) == [ServerSentEvent(data="x")]


def test_the_first_line_that_is_not_an_event_stream_field_is_remembered():
    decoder = EventStreamDecoder()
    decoder.feed(b"<html>\n<body>Bad gateway</body>\n")
    assert decoder.close() == []
    assert decoder.unrecognized == "<html>"


def test_lines_are_accepted_with_or_without_their_line_endings():
    lines = ["data: a\r\n", "\r\n", "data: b\n", "\n", "data: c", ""]
    assert [event.data for event in iter_events(lines)] == ["a", "b", "c"]


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.integers(min_value=0, max_value=200), max_size=12), st.booleans())
def test_any_chunking_of_the_bytes_decodes_the_same_events(cuts, crlf):
    data = STREAM.replace("\n", "\r\n" if crlf else "\n").encode()
    bounds = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    decoder = EventStreamDecoder()
    events = []
    for start, end in itertools.pairwise(bounds):
        events += decoder.feed(data[start:end])
    assert events + decoder.close() == EVENTS


def test_text_deltas_accumulate_into_the_content_and_are_returned_one_by_one():
    accumulator = ChunkAccumulator()
    pieces = [accumulator.add(chunk({"content": part})) for part in ["Hel", "lo", ""]]
    accumulator.add(chunk({}, "stop"))
    assert pieces == ["Hel", "lo", ""]
    assert accumulator.finish() == AssistantReply(content="Hello", finish_reason="stop")


def test_two_parallel_tool_calls_interleaved_accumulate_by_index():
    chunks = [
        call_delta(0, id="call_a", type="function", function={"name": "read", "arguments": ""}),
        call_delta(1, id="call_b", type="function", function={"name": "write", "arguments": ""}),
        call_delta(1, function={"arguments": '{"path": '}),
        call_delta(0, function={"arguments": '{"pa'}),
        call_delta(0, function={"arguments": 'th": "a"}'}),
        call_delta(1, function={"arguments": '"b"}'}),
        chunk({}, "tool_calls"),
    ]
    assert accumulate(chunks) == AssistantReply(
        content="",
        tool_calls=(
            ToolCall(id="call_a", name="read", arguments='{"path": "a"}'),
            ToolCall(id="call_b", name="write", arguments='{"path": "b"}'),
        ),
        finish_reason="tool_calls",
    )


def test_usage_from_a_final_chunk_with_empty_choices_is_recorded():
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    reply = accumulate([chunk({"content": "x"}, "stop"), {"choices": [], "usage": usage}])
    assert reply.usage == usage


def test_choices_that_are_not_a_list_raise_a_terminal_model_error_naming_them():
    with pytest.raises(ModelError) as caught:
        accumulate([chunk({"content": "x"}), {"choices": {"index": 0}}])
    assert str(caught.value) == (
        "chunk 2 of the model's stream is malformed: 'choices' must be a list "
        "(got {'index': 0} that is a dict)"
    )
    assert caught.value.retryable is False


def test_tool_call_arguments_that_are_not_a_string_are_malformed():
    with pytest.raises(ModelError, match=r"'function\.arguments' must be a string \(got \{\}"):
        accumulate([call_delta(0, id="c", function={"name": "f", "arguments": {}})])


def test_a_tool_call_that_never_gets_a_name_cannot_be_finished():
    with pytest.raises(ModelError, match=r"^tool call 0 in the stream never received a function"):
        accumulate([call_delta(0, id="c", function={"arguments": "{}"})])


def test_an_error_object_in_the_stream_raises_its_message():
    error = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    with pytest.raises(ModelError) as caught:
        accumulate([chunk({"content": "x"}), error])
    assert str(caught.value) == (
        "the model server reported an error in the middle of its answer: upstream overloaded"
    )
    assert caught.value.retryable is True


def test_a_reply_turns_into_the_assistant_message_of_the_next_request():
    reply = AssistantReply(content="", tool_calls=(ToolCall("c1", "read", '{"p": 1}'),))
    assert reply.to_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}
        ],
    }
    assert json.loads(reply.tool_calls[0].arguments) == {"p": 1}
