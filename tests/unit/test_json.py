"""vcfvirtual._json.loads against the standard library's json.loads (the oracle): the same
value or the same refusal for every input, but a JSONDecodeError where json.loads raises
RecursionError."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vcfvirtual import _json

# JSON values as json.dumps writes them: every scalar kind, nested.
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 80), max_value=1 << 80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


def outcome(parse, text):
    """("value", v) or ("refused", the ValueError subclass family) of one parse."""
    try:
        return "value", parse(text)
    except UnicodeDecodeError:
        return "refused", UnicodeDecodeError
    except ValueError:
        return "refused", ValueError


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN and -0.0 told from 0.0 (json.loads keeps both)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans())
def test_every_value_json_dumps_writes_reads_as_json_loads_reads_it(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    for form in (text, text.encode("utf-8")):
        kind, got = outcome(_json.loads, form)
        assert kind == "value" and same(got, json.loads(form))


@settings(max_examples=300, deadline=None)
@given(VALUES, st.data())
def test_edited_json_gets_json_loads_verdict(value, data):
    """Valid JSON with bytes inserted or removed: whatever json.loads says of it (a value or
    a refusal), _json.loads says too."""
    raw = bytearray(json.dumps(value).encode("utf-8"))
    at = data.draw(st.integers(0, len(raw)))
    if data.draw(st.booleans()) and at < len(raw):
        del raw[at]
    else:
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    theirs, ours = outcome(json.loads, bytes(raw)), outcome(_json.loads, bytes(raw))
    assert theirs[0] == ours[0] and (same(theirs[1], ours[1]) if theirs[0] == "value" else theirs[1] is ours[1])


# Characters inserted into text: any, and those that trouble a parser given str (a lone
# surrogate has no UTF-8, a byte-order mark, a NUL, quotes, escapes, a raw tab).
INSERTED = st.text(
    st.characters() | st.sampled_from(["\ud800", "\udfff", "\ufeff", "\x00", '"', "\\", "\t", "\u00e9"]),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(VALUES, st.data())
def test_edited_json_text_gets_json_loads_verdict(value, data):
    """As the test above, on str (the references' metadata strings are parsed as str)."""
    text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
    at = data.draw(st.integers(0, len(text)))
    if data.draw(st.booleans()) and at < len(text):
        text = text[:at] + text[at + 1 :]
    else:
        text = text[:at] + data.draw(INSERTED) + text[at:]
    theirs, ours = outcome(json.loads, text), outcome(_json.loads, text)
    assert theirs[0] == ours[0] and (same(theirs[1], ours[1]) if theirs[0] == "value" else theirs[1] is ours[1])


EDGE_CASES = [
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',  # json.loads accepts these
    b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 byte-order mark: json.loads skips it
    b'{"a": "\\ud800"}',  # a lone surrogate escape
    b'{"a": 1, "a": 2}',  # the last duplicate wins
    b"1e400",
    b"-0.0",
    b"123456789012345678901234567890",
    b'"tab\there"',  # a raw control character in a string: refused
    b"[1,]",
    b"01",
    b"+1",
    b"{'a': 1}",
    b"// x\n1",
    b'{"a": 1} x',
    b"",
    b" \t\r\n[] \n",
    b"\xc2\xa0[]",  # a no-break space is not JSON whitespace
    b'"\\x41"',
    b'"\\u00e9\\u20ac"',
    b'"\xff"',  # not UTF-8
]

# Text no bytes are: a raw lone surrogate (json.loads reads it, msgspec cannot encode it).
STR_EDGE_CASES = ['"\ud800"', '{"a": "x\udfffy"}', "[\ud800]", "\ufeff[1]"]


@pytest.mark.parametrize("text", STR_EDGE_CASES, ids=range(len(STR_EDGE_CASES)))
def test_str_edge_cases_get_json_loads_verdict(text):
    theirs, ours = outcome(json.loads, text), outcome(_json.loads, text)
    assert theirs[0] == ours[0]
    assert same(theirs[1], ours[1]) if theirs[0] == "value" else theirs[1] is ours[1]


@pytest.mark.parametrize("text", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_get_json_loads_verdict(text):
    forms: list[str | bytes | bytearray] = [text, bytearray(text)]
    try:
        forms.append(text.decode("utf-8"))  # as str too, where the bytes are UTF-8
    except UnicodeDecodeError:
        pass
    for form in forms:
        theirs, ours = outcome(json.loads, form), outcome(_json.loads, form)
        assert theirs[0] == ours[0]
        assert same(theirs[1], ours[1]) if theirs[0] == "value" else theirs[1] is ours[1]


@pytest.mark.parametrize("form", [str, bytes])
def test_nesting_too_deep_is_a_json_error_not_a_recursion_error(form):
    deep = "[" * 200_000 + "]" * 200_000
    text = deep if form is str else deep.encode()
    with pytest.raises(RecursionError):
        json.loads(text)  # what the standard library does, and escaped every handler
    with pytest.raises(json.JSONDecodeError, match="nested deeper than Python's recursion limit"):
        _json.loads(text)
