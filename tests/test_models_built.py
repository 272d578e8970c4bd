"""plangate._models: models built from values already valid are the models validation would make."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from plangate._models import built, restamped
from plangate.errors import ConfigError
from plangate.events import StepStateEvent
from plangate.tools.result import ToolResult


class _Step(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tags: list[str] = Field(default_factory=list)
    note: str = "none"


def test_a_built_model_is_the_validated_one_field_for_field_and_in_its_json() -> None:
    event = built(StepStateEvent, {"step_id": "s1", "status": "complete", "output": {"rows": [1, 2]}})
    validated = StepStateEvent(step_id="s1", status="complete", output={"rows": [1, 2]})
    assert event == validated
    assert event.model_dump_json() == validated.model_dump_json()  # fields in their declared order
    assert event.model_fields_set == validated.model_fields_set
    result = built(ToolResult, {"status": "done", "success": True, "observation": "5", "summary": "5"})
    assert result == ToolResult.done("5")
    assert result.model_dump_json() == ToolResult.done("5").model_dump_json()


def test_a_default_factory_makes_a_new_value_for_each_model() -> None:
    first, second = built(_Step, {"id": "a"}), built(_Step, {"id": "b"})
    assert first == _Step(id="a") and first.tags == [] and first.tags is not second.tags


def test_restamped_is_model_copy_with_the_update() -> None:
    event = StepStateEvent(step_id="s1", status="running")
    update = {"run_id": "run_1", "seq": 7, "at": 12.5}
    copy = restamped(event, update)
    assert copy == event.model_copy(update=update)
    assert copy.model_fields_set == event.model_copy(update=update).model_fields_set
    assert event.seq == 0  # the original is left as it was


def test_what_cannot_be_built_without_validation_is_refused() -> None:
    class _Private(BaseModel):
        id: str
        _cache: dict[str, str] = PrivateAttr(default_factory=dict)

    with pytest.raises(ConfigError, match="_Step: no value for id"):
        built(_Step, {"note": "x"})
    with pytest.raises(ConfigError, match="_Private has private attributes or extra fields: validate it"):
        built(_Private, {"id": "a"})

    class _Made(BaseModel):
        id: str

        def __new__(cls, *args: object, **kwargs: object) -> _Made:
            return super().__new__(cls)

    with pytest.raises(ConfigError, match="_Made makes its instances its own way: validate it instead"):
        built(_Made, {"id": "a"})
