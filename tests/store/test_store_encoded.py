"""EncodedObject: JSON objects encoded once and joined into larger ones, valid by construction."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel, ConfigDict, JsonValue

from plangate.errors import ConfigError
from plangate.store import EncodedObject


class _Args(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # as a plan's models: NaN written as NaN

    name: str
    value: JsonValue = None
    tiny: float = 1e-7


def test_of_encodes_compactly_and_joined_keeps_each_member_as_it_was() -> None:
    steps = EncodedObject.of({"a": {"status": "complete"}, "é": [1, 2.5, None, True]})
    joined = EncodedObject.joined({"steps": steps, 'quote "key"': EncodedObject.of({})})
    assert steps.text == '{"a":{"status":"complete"},"é":[1,2.5,null,true]}'
    assert json.loads(joined.text) == {
        "steps": {"a": {"status": "complete"}, "é": [1, 2.5, None, True]},
        'quote "key"': {},
    }
    assert EncodedObject.joined({}).text == "{}"


def test_of_model_is_the_dump_of_the_model_however_its_floats_are_spelt() -> None:
    model = _Args(name="NaN handling and Infinity", value={"rows": [1, 2]})
    encoded = EncodedObject.of_model(model)
    assert json.loads(encoded.text) == model.model_dump(mode="json")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_numbers_json_has_no_spelling_for_are_refused_not_written_as_null(bad: float) -> None:
    with pytest.raises(ConfigError, match=r"the plan: expected JSON data .*Out of range float"):
        EncodedObject.of_model(_Args(name="x", value={"deep": [bad]}), "the plan")
    with pytest.raises(ConfigError, match=r"the steps: expected JSON data"):
        EncodedObject.of({"x": bad}, "the steps")


def test_pairs_are_encoded_one_at_a_time_into_one_object() -> None:
    pairs = ((f"s{i}", {"status": "complete", "attempt": i}) for i in range(3))
    encoded = EncodedObject.of_pairs(pairs, "the steps")
    assert json.loads(encoded.text) == {f"s{i}": {"status": "complete", "attempt": i} for i in range(3)}
    with pytest.raises(ConfigError, match=r"the steps: s1: expected JSON data .*set is not JSON"):
        EncodedObject.of_pairs([("s0", {}), ("s1", {"seen": {1}})], "the steps")
    with pytest.raises(ConfigError, match="the steps: expected string keys; found int key 3"):
        EncodedObject.of_pairs([(3, {})], "the steps")  # type: ignore[list-item]


def test_what_is_not_an_encoded_object_of_json_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"make one with EncodedObject\.of or EncodedObject\.joined"):
        EncodedObject('{"made": "by hand"}')
    with pytest.raises(ConfigError, match="expected string keys and EncodedObject members; found int key 1"):
        EncodedObject.joined({1: EncodedObject.of({})})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="found str key 'plan' with a dict"):
        EncodedObject.joined({"plan": {"a": 1}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="expected a JSON object"):
        EncodedObject.of([1, 2])  # type: ignore[arg-type]
