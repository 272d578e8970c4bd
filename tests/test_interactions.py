"""``plangate.interactions``: the resolutions a person gives, built as the README shows them, one
discriminated union, parsed from its dict form with errors that name the field."""

from __future__ import annotations

import pytest

from plangate.errors import InteractionError
from plangate.interactions import Answer, Approve, Edit, Reject, parse_resolution, resolution_dict


def test_each_resolution_takes_its_one_field_positionally_like_approve() -> None:
    assert Approve() == parse_resolution({"kind": "approve"})
    assert Reject("not this week") == Reject(reason="not this week")
    assert Answer("Tuesday") == Answer(text="Tuesday")
    assert Edit({"slot": 4}) == Edit(arguments={"slot": 4})
    assert resolution_dict(Reject("not this week")) == {"kind": "reject", "reason": "not this week"}
    assert Reject() == Reject(reason="")


def test_a_field_given_both_ways_is_refused() -> None:
    with pytest.raises(TypeError, match="'reason' given twice"):
        Reject("a", reason="b")


@pytest.mark.parametrize(
    "resolution",
    [Approve(), Reject(reason="not today"), Answer(text="Tuesday"), Edit(arguments={"room": "Blue"})],
)
def test_a_resolution_survives_its_dict_form(resolution: Approve | Reject | Answer | Edit) -> None:
    assert parse_resolution(resolution_dict(resolution)) == resolution


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"kind": "maybe"}, "invalid resolution: resolution: Input tag 'maybe' found using 'kind'"),
        ({"kind": "answer"}, "invalid resolution: answer.text: Field required"),
        ({"kind": "approve", "why": "x"}, "invalid resolution: approve.why: Extra inputs are not permitted"),
    ],
)
def test_a_bad_resolution_names_the_field(value: dict[str, object], message: str) -> None:
    with pytest.raises(InteractionError) as caught:
        parse_resolution(value)
    assert str(caught.value).startswith(message)
