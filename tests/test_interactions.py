"""``plangate.interactions``: the resolutions a person gives, built as the README shows them."""

from __future__ import annotations

import pytest

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
