"""`stepdbg diff` says the randomness each run drew where they part, as the TUI's D does (issue
45, the twentieth walk's 2: `stepdbg diff --steps 2 "python demos/nondeterministic.py" "python
demos/nondeterministic.py"` named `0 (NoisyLinear) output` and no randomness, where D says
`randomness: python random: random.gauss at ...:17`). Each run's record says, per step, what
it drew and in which module call (stepdbg/agent/diff/randomness.StepDraws); the words are
the diff at a pause's (stepdbg/wire/diff_randomness.py). The command's real stdout."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from test_diff import FIX, PY, answer, diff, line

from stepdbg.wire.step_diff import FORMAT_VERSION


@pytest.mark.slow
def test_the_demos_random_gauss_is_named_as_the_tuis_D_names_it():
    demo = f"{PY} demos/nondeterministic.py"
    r = diff("--steps", "2", demo, demo)
    assert r.returncode == 1, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("first divergence: step 0, forward: 0 (NoisyLinear) output"), r.stdout
    assert out[1] == "randomness: python random: random.gauss at demos/nondeterministic.py:17", r.stdout
    assert out[2].startswith("tolerance: bitwise"), r.stdout


@pytest.mark.slow
def test_a_seeded_random_is_not_blamed_and_an_unseeded_one_is(tmp_path):
    """Both runs seed `random`: they draw the same, and differ for --scale alone; unseeded,
    the draw is named, with its module, in the JSON too."""
    r = diff(line("diff_seeded_noise.py", "--seed"), line("diff_seeded_noise.py", "--seed", "--scale", "2"))
    assert r.returncode == 1 and r.stdout.splitlines()[1] == "no randomness found that moved", r.stdout
    r = diff("--json", line("diff_seeded_noise.py"), line("diff_seeded_noise.py", "--scale", "2"))
    said = answer(r)["randomness"]
    assert [(d["source"], d["call"], d["module"], d["line"]) for d in said] == [
        ("python random", "random.gauss", "0", 25)], said
    assert "@noise" in (FIX / "diff_seeded_noise.py").read_text().splitlines()[24]


def test_a_records_randomness_is_printed_plain_or_refused(tmp_path):
    """Kept records are data anyone may hand over: a draw's words reach the terminal with
    their control characters escaped; a randomness that is not one is refused in one line."""
    header = {"kind": "header", "version": FORMAT_VERSION, "steps": 1, "max_calls": 4096}
    fp = {"shape": [2], "dtype": "float32", "hash": "{}", "stats": [1.0], "samples": [0.5]}
    drawn = {"draws": [{"source": "python random", "call": "random.gauss\x1b[2J", "module": "fc",
                        "file": str(ROOT / "x.py"), "line": 3}], "moved": [], "states": {}}

    def record(name: str, h: str, randomness: object) -> str:
        entry = {"step": 0, "phase": "forward", "module": "fc", "what": "output", "call": 0,
                 "fp": {**fp, "hash": h}}
        path = tmp_path / name
        path.write_text("".join(json.dumps(x) + "\n" for x in (
            header, entry, {"kind": "step", "step": 0, "randomness": randomness}, {"kind": "end"})))
        return str(path)

    r = diff(record("A.jsonl", "a", drawn), record("B.jsonl", "b", drawn))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[1] == "randomness: python random: random.gauss\\x1b[2J at x.py:3", r.stdout
    r = diff(record("A.jsonl", "a", {"draws": [{"line": "3"}]}), record("B.jsonl", "b", drawn))
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.strip().endswith("is not a record stepdbg diff wrote (line 3: a step's draw is not a draw)"), \
        r.stderr
