"""A job's step records (the `history` answer, the `step` event's `earlier`) are the word of
the user's own process: anything malformed in them is dropped by the TUI, never raised (issue
43's leftover: a record without a `step`, a non-list `earlier`, a string where a dict goes
raised in `with_records` and ended the TUI's handler). Hypothesis over JSON values."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stepdbg_tui.messages import StepSummary, with_records

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["step", "loss", "earlier", "x"]),
                                                                inner, max_size=4),
    max_leaves=20)
records = st.lists(st.fixed_dictionaries({"step": st.integers(-3, 50)}, optional={"loss": json_values}) | json_values,
                   max_size=8) | json_values


def _are_records(out: Any) -> bool:
    return isinstance(out, list) and all(isinstance(r, dict) and type(r["step"]) is int for r in out)


@settings(max_examples=300, deadline=None)
@given(history=records, arrived=records)
def test_with_records_takes_any_answer_and_keeps_only_step_records(history, arrived):
    out = with_records(history, arrived)
    assert _are_records(out)
    good = [r for r in arrived if isinstance(r, dict) and type(r.get("step")) is int] if isinstance(arrived, list) else []
    if good:  # (a rewind's: the records that came replace the history's from their first step on)
        assert out[-len(good):] == good


@settings(max_examples=300, deadline=None)
@given(data=json_values, newer=json_values)
def test_a_step_event_of_any_shape_gives_records_and_hands_them_on(data, newer):
    older, later = StepSummary(data), StepSummary(newer)
    assert _are_records(older.records())
    assert older.can_replace(later)
    assert _are_records(later.records())


def test_a_record_without_a_step_is_dropped_not_raised():
    assert with_records([{"step": 1}, {"loss": 2.0}, "x"], [{"loss": 1.0}, {"step": 2, "loss": 0.5}]) == \
        [{"step": 1}, {"step": 2, "loss": 0.5}]
