"""Two models the step calls one after the other (an encoder, then a head, both top-level
nn.Modules; tests/fixtures/diff_two_roots.py): the second's parameters and arguments are
recorded from step 0 on, and a difference in them is named where it is (issue 46, the
attacker's finding 5). Real subprocesses, real torch."""

from __future__ import annotations

import pytest
from test_diff import FIX, answer, diff, line


def marked(tag: str) -> int:
    return next(i for i, x in enumerate((FIX / "diff_two_roots.py").read_text().splitlines(), 1) if tag in x)


@pytest.mark.slow
def test_the_second_models_weights_are_the_steps_input_at_step_0():
    """Another seed for the head's weights: the runs part at step 0's input, the head's
    weight (before: its parameters were recorded from step 1 only, and step 0 named the
    head's Linear output in the forward)."""
    r = diff("--json", "--steps", "2", line("diff_two_roots.py"), line("diff_two_roots.py", "--head-seed", "5"))
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"]) == (0, "input", "Head:out", "weight"), d


@pytest.mark.slow
def test_the_second_models_argument_made_by_the_step_is_named_at_its_call():
    """The step's own code scales the encoder's output before the head: the first to differ
    is the head's argument at the line that calls it, said to be made by the step's code
    (before: the head's argument at step 0 was not recorded, and its Linear's argument was
    said to be made in the first model's own code)."""
    r = diff("--json", line("diff_two_roots.py"), line("diff_two_roots.py", "--scale", "1.5"))
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"], d["class"]) == (0, "forward", "Head", "input[0]", "Head"), d
    assert "input_of" not in d and d["line"] == marked("# @head-called")
    assert "made in the step's own code" in d["summary"]


@pytest.mark.slow
def test_two_identical_runs_of_two_models_agree_with_both_recorded():
    r = diff("--json", "--steps", "2", line("diff_two_roots.py"), line("diff_two_roots.py"))
    assert r.returncode == 0, r.stderr
    result = answer(r)
    assert result["first_divergence"] is None and result["fingerprints"]["A"] == result["fingerprints"]["B"] == 42  # 39 before: 2 weights and an argument of the head at step 0


@pytest.mark.slow
def test_one_model_is_named_one_way_in_the_forward_and_the_gradients():
    """The step scales the encoder's weight gradient: the runs part at step 0's backward, at
    the encoder's Linear named as the forward names it (`fc`, the first model's), not
    `encoder.fc` (the program's name: one model had two names in one answer)."""
    r = diff("--json", line("diff_two_roots.py"), line("diff_two_roots.py", "--grad-scale", "2"))
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"]) == (0, "backward", "fc", "weight.grad"), d
