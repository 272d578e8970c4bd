"""The resolution vocabulary: one discriminated union, parsed from its dict form with errors that name the
field."""

from __future__ import annotations

import pytest

from plangate.errors import InteractionError
from plangate.interactions import Answer, Approve, Edit, Reject, parse_resolution, resolution_dict


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
