"""A NaN in the data is named by the user's variable at the line it entered the model
(issue 44 item 6): `x = x * nan` was reported as `batch ... at loss.backward()`, and the
break said "born in the forward", which points the wrong way for data."""

from __future__ import annotations

from pathlib import Path

from conftest import marked_line, run_stepdbg

SCRIPT = Path(__file__).parent / "fixtures" / "data_nan_top_level.py"


def test_a_data_nan_is_named_by_the_users_variable_where_it_entered_the_model(tmp_path):
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", script_args=(str(SCRIPT),))
    assert run.returncode == 0 and "done" in run.stdout, run.stderr[-2000:]
    (brk,) = run.of("break")
    assert brk["step"] == 5 and "the model's input is already non-finite: it came with the data" in brk["reason"], brk
    (replay,) = run.of("replay")
    first = replay["first_nonfinite"]
    assert (first["where"], first["tensor"], first["count"]) == ("input", "x", 512), first
    assert first["line"] == marked_line(SCRIPT, "enters") and first["code"].startswith("pred = model(x)"), first
    assert replay["summary"] == "the data: x already holds 512 non-finite values, the first at [0, 0]", replay
