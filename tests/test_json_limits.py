"""The codec's limits, pure: what orjson does that they rely on, and that
`dumps_within` and `check_loaded` refuse exactly what they say. No sockets,
no trio."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callboard.codec import JSONRefused, check_loaded, dumps, dumps_within, kept_copy, loads
from callboard.mailbox import MAX_DEPTH

INT_MIN, INT_MAX = -(2**63), 2**64 - 1


def nest(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


class TestWhatOrjsonDoes:
    """The facts about orjson the codec is built on: if one changes, these fail first."""

    def test_orjson_encodes_254_levels_and_refuses_255_with_the_message_the_codec_expects(self):
        assert orjson.dumps(nest(254)) == b"[" * 254 + b"1" + b"]" * 254
        with pytest.raises(TypeError, match=r"^Recursion limit reached$"):
            orjson.dumps(nest(255))

    def test_orjson_refuses_an_integer_past_64_bits_with_the_message_the_codec_expects(self):
        assert orjson.dumps([INT_MIN, INT_MAX]) == b"[-9223372036854775808,18446744073709551615]"
        with pytest.raises(TypeError, match=r"^Integer exceeds 64-bit range$"):
            orjson.dumps(INT_MAX + 1)

    def test_orjson_reads_an_integer_past_64_bits_as_a_float_and_a_repeated_key_as_the_last(self):
        assert orjson.loads("[18446744073709551617, 18446744073709551615]") == [
            1.8446744073709552e19,
            18446744073709551615,
        ]
        assert orjson.loads('{"a": 1, "a": 2}') == {"a": 2}

    @given(st.floats(min_value=2.0**63, allow_infinity=False), st.sampled_from([1, -1]))
    def test_orjson_writes_every_float_of_2_63_or_more_with_an_exponent(self, value, sign):
        assert b"e+" in orjson.dumps(sign * value)


def held_by(encode: Any, count: int = 1000) -> int:
    """Bytes of memory that ``count`` small values encoded by ``encode`` hold."""
    tracemalloc.start()
    try:
        kept = [encode({"total": i}) for i in range(count)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return held


class TestEncodedSize:
    """orjson's bytes keep the buffer they were written into: the codec copies a
    small one out, so that what a batch holds (bodies, event data) is the size
    of the JSON, not a page per value."""

    def test_orjson_alone_holds_kilobytes_for_a_short_value(self):
        assert held_by(orjson.dumps) > 1000 * 1024

    @pytest.mark.parametrize("encode", [dumps, lambda value: dumps_within(value, MAX_DEPTH)])
    def test_a_short_value_holds_about_its_own_size(self, encode):
        assert encode({"total": 7}) == b'{"total":7}'
        assert held_by(encode) < 1000 * 100

    def test_a_kept_copy_is_the_value_and_copies_only_what_dumps_did_not(self):
        small = dumps({"total": 7})
        assert kept_copy(small) is small  # copied out by dumps already
        big = dumps({"text": "x" * 3000})
        assert kept_copy(big) == big and kept_copy(big) is not big
        # Of its own size: 100 kept copies hold about 100 values' bytes.
        assert held_by(lambda v: kept_copy(dumps({"text": "x" * 3000, **v})), 100) < 100 * 3300


class TestDumpsWithin:
    def test_the_deepest_value_allowed_encodes_as_dumps_does_and_one_level_more_is_none(self):
        assert dumps_within(nest(MAX_DEPTH), MAX_DEPTH) == dumps(nest(MAX_DEPTH))
        assert dumps_within(nest(MAX_DEPTH + 1), MAX_DEPTH) is None
        assert dumps_within(nest(254), MAX_DEPTH) is None
        assert dumps_within(nest(1000), MAX_DEPTH) is None

    def test_a_value_that_holds_itself_is_too_deep(self):
        cycle: list[Any] = []
        cycle.append(cycle)
        assert dumps_within(cycle, MAX_DEPTH) is None

    def test_an_integer_past_64_bits_is_a_type_error_that_names_where_it_is(self):
        with pytest.raises(TypeError) as refused:
            dumps_within({"a": [1, {"b": -(2**63) - 1}]}, MAX_DEPTH)
        assert str(refused.value) == (
            "the value at /a/1/b is the integer -9223372036854775809, outside the 64-bit "
            "range integers are kept in exactly (-9223372036854775808 to "
            "18446744073709551615); send it as a string"
        )

    @settings(max_examples=200)
    @given(
        inner=st.recursive(
            st.one_of(st.none(), st.integers(-10, 10), st.text(max_size=3)),
            lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids),
            max_leaves=6,
        ),
        wrap=st.integers(0, 260),
        pad=st.sampled_from([0, 5000]),
        depth=st.integers(1, 253),
    )
    def test_dumps_within_gives_what_dumps_gives_or_none_past_the_depth(
        self, inner, wrap, pad, depth
    ):
        value = {"pad": "[" * pad, "v": nest(wrap, inner)}
        expected = dumps(value) if depth_of(value) <= depth else None
        assert dumps_within(value, depth) == expected


class Pairs(list):  # type: ignore[type-arg]
    """An object as written in a text: its (key, value) pairs, a key maybe twice."""


keys = st.sampled_from(["a", "b", "a:", "~/"])
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([INT_MIN - 1, INT_MIN, INT_MAX, INT_MAX + 1, 2**63, -(10**30)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)
trees = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=3) | st.lists(st.tuples(keys, kids)).map(Pairs),
    max_leaves=10,
)


def render(tree: Any, *, escape: bool, spaced: bool) -> str:
    """``tree`` as JSON text, colons in strings escaped as \\u003a when ``escape``."""
    sep, colon = (", ", ": ") if spaced else (",", ":")

    def text(node: Any) -> str:
        if isinstance(node, Pairs):
            return "{" + sep.join(text(k) + colon + text(v) for k, v in node) + "}"
        if isinstance(node, list):
            return "[" + sep.join(map(text, node)) + "]"
        written = json.dumps(node)
        return written.replace(":", "\\u003a") if escape and isinstance(node, str) else written

    return text(tree)


def is_lossy(tree: Any) -> bool:
    if isinstance(tree, Pairs):
        keys = [k for k, _ in tree]
        return len(set(keys)) < len(keys) or any(is_lossy(v) for _, v in tree)
    if isinstance(tree, list):
        return any(is_lossy(v) for v in tree)
    return isinstance(tree, int) and not isinstance(tree, bool) and not INT_MIN <= tree <= INT_MAX


class TestCheckLoaded:
    @settings(max_examples=300)
    @given(tree=trees, escape=st.booleans(), spaced=st.booleans())
    def test_a_text_is_refused_exactly_when_loading_it_would_lose_a_key_or_an_integer(
        self, tree, escape, spaced
    ):
        text = render(Pairs([("v", tree)]), escape=escape, spaced=spaced)
        try:
            check_loaded(text, loads(text), depth=MAX_DEPTH)
        except JSONRefused:
            refused = True
        else:
            refused = False
        assert refused == is_lossy(tree)

    @pytest.mark.parametrize(
        ("text", "pointer", "message"),
        [
            (
                '{"to": "a/b", "to": "c/d"}',
                "/to",
                "the top-level object has the key 'to' more than once; give each key once "
                "(a repeated key would silently replace the first)",
            ),
            (
                '{"body": {"x~/": {"n": 1, "n": 2}}}',
                "/body/x~0~1/n",
                "the object at /body/x~0~1 has the key 'n' more than once; give each key "
                "once (a repeated key would silently replace the first)",
            ),
            (
                '{"body": [0, 18446744073709551616]}',
                "/body/1",
                "the value at /body/1 is the integer 18446744073709551616, outside the 64-bit "
                "range integers are kept in exactly (-9223372036854775808 to "
                "18446744073709551615); send it as a string",
            ),
            (
                '{"id": "1", "body": ' + json.dumps(nest(MAX_DEPTH)) + "}",
                "/body",
                "the value at /body nests arrays and objects deeper than 127 levels, the limit",
            ),
        ],
    )
    def test_a_refusal_names_the_place_with_a_json_pointer(self, text, pointer, message):
        with pytest.raises(JSONRefused) as refused:
            check_loaded(text, loads(text), depth=MAX_DEPTH)
        assert (refused.value.pointer, str(refused.value)) == (pointer, message)

    def test_the_ends_of_the_64_bit_range_and_a_big_float_are_taken(self):
        text = '{"n": [-9223372036854775808, 18446744073709551615, 1e+19, "e+"]}'
        check_loaded(text, loads(text), depth=MAX_DEPTH)
