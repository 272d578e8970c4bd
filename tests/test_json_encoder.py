"""``plangate._json.Encoder``: the standard library's text, with its C half made once."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate._json import Encoder

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
_OPTIONS: list[dict[str, Any]] = [
    {},
    {"separators": (",", ":")},
    {"separators": (",", ":"), "sort_keys": True},
    {"ensure_ascii": True},
    {"sort_keys": True},
    {"separators": (",", ":"), "allow_nan": False},
]


@pytest.mark.parametrize("options", _OPTIONS, ids=lambda options: ",".join(options) or "defaults")
@given(value=_VALUES)
def test_it_writes_what_the_standard_encoder_writes(options: dict[str, Any], value: object) -> None:
    expected = json.JSONEncoder(ensure_ascii=options.pop("ensure_ascii", False), **options).encode(value)
    assert Encoder(**options).encode(value) == expected


def test_each_call_starts_afresh_after_a_value_it_refused() -> None:
    encoder = Encoder(separators=(",", ":"), allow_nan=False)
    with pytest.raises(ValueError, match="Out of range float"):
        encoder.encode({"a": [1, math.nan]})
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        encoder.encode({"a": {1}})
    assert encoder.encode({"a": [1, 2.5, "é"]}) == '{"a":[1,2.5,"é"]}'


def test_non_finite_numbers_are_written_as_javascript_spells_them_when_allowed() -> None:
    assert Encoder().encode([math.inf, -math.inf]) == "[Infinity, -Infinity]"


def test_keys_that_are_not_strings_are_written_as_the_standard_encoder_writes_them() -> None:
    value = {1: "a", 2.5: "b", None: "c", False: "d"}
    assert Encoder(sort_keys=False).encode(value) == json.dumps(value, ensure_ascii=False)
