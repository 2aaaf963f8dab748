"""A run writes its own record (its script may write anything there): whatever a record
holds, `stepdbg diff` reads it or refuses it in one line (RecordError, exit 2), never a
traceback, never "the runs differ" (exit 1) for a file it could not read. An attacker's
walk of diff found KeyError, ValueError, OverflowError and AttributeError (issue 46)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepdbg.wire.step_diff import MAX_LINE, RecordError, first_divergence, read_record

HEADER = {"kind": "header", "version": 1, "steps": 1, "max_calls": 4096}
ENTRY = {"step": 0, "phase": "forward", "module": "fc", "what": "output", "call": 0,
         "fp": {"shape": [2], "dtype": "float32", "hash": "ab", "stats": [1.0, 2.0], "samples": [0.5]}}


def written(tmp_path, *lines: object) -> str:
    path = tmp_path / "r.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("entry", [
    {k: v for k, v in ENTRY.items() if k != "step"}, {**ENTRY, "step": "0"}, {**ENTRY, "step": 1e400},
    {**ENTRY, "step": True}, {k: v for k, v in ENTRY.items() if k != "fp"}, {**ENTRY, "fp": [1, 2]},
    {**ENTRY, "fp": {**ENTRY["fp"], "stats": ["zz"]}}, {**ENTRY, "fp": {**ENTRY["fp"], "samples": "x"}},
    {**ENTRY, "call": "0"}, {**ENTRY, "module": 3},
], ids=["no step", "step text", "step inf", "step bool", "no fp", "fp list", "stats text", "samples text",
        "call text", "module number"])
def test_a_record_entry_that_stepdbg_did_not_write_is_refused(tmp_path, entry):
    with pytest.raises(RecordError):
        read_record(written(tmp_path, HEADER, entry, {"kind": "step", "step": 0}))


def test_a_line_longer_than_the_cap_is_refused_without_being_held(tmp_path):
    with pytest.raises(RecordError, match="over 1,000,000 characters"):
        read_record(written(tmp_path, HEADER, "x" * (MAX_LINE * 3)))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                       max_size=3), max_leaves=10)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_record_is_compared_or_refused(tmp_path_factory, data):
    entry = dict(ENTRY, fp=dict(ENTRY["fp"]))
    for key in data.draw(st.lists(st.sampled_from([*ENTRY, *(f"fp.{k}" for k in ENTRY["fp"])]), max_size=3)):
        holder, _, name = key.rpartition(".")
        target = entry["fp"] if holder else entry
        if isinstance(target, dict):  # (an earlier draw may have made "fp" itself a number or None)
            target[name] = data.draw(json_values)
    folder = tmp_path_factory.mktemp("rec")
    try:
        a = read_record(written(folder, HEADER, entry, {"kind": "step", "step": 0}))
    except RecordError:
        return
    b = read_record(written(folder, HEADER, ENTRY, {"kind": "step", "step": 0}))
    for atol in (0.0, 1e-3):
        first_divergence(a, b, [0], atol=atol, rtol=atol)
