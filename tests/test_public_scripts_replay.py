"""Found running public training scripts (pytorch/examples' word_language_model, a
top-level nn.Sequential loop) under `stepdbg --no-tui --break nan --on-break replay` with a
learning rate far too high. tests/fixtures/manual_sgd_diverges.py: a model of torch's own
modules, updated by hand with no optimizer; its last Linear overflows at step 1."""

from __future__ import annotations

from conftest import ROOT, run_stepdbg

FIXTURE = ROOT / "tests" / "fixtures" / "manual_sgd_diverges.py"


def marker_line(marker: str) -> int:
    return next(i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in line)


def replayed(tmp_path):
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", script_args=(str(FIXTURE),))
    assert run.returncode == 0, run.stderr
    replays = [e for e in run.events if e["event"] == "replay"]
    assert len(replays) == 1, run.stderr
    first = replays[0]["first_nonfinite"]
    assert (replays[0]["step"], first["where"], first["module"], first["op"]) == (1, "forward", "3", "linear"), replays
    return run, replays[0]


def test_the_replay_names_the_line_that_called_the_model_not_the_backward(tmp_path):
    run, replay = replayed(tmp_path)
    assert replay["first_nonfinite"]["line"] == marker_line("# @model-call"), (replay, run.stderr)


def test_the_divergence_advice_offers_no_lr_pin_without_an_optimizer(tmp_path):
    run, replay = replayed(tmp_path)
    assert replay["advice"]["cause"] == "divergence", replay
    assert "lr X pin" not in replay["advice"]["text"], replay["advice"]
    # Nor "add warmup" as a fact: with no optimizer, stepdbg sees no learning rate, and a
    # script's own warmup (lr = base * min(1, step / warm)) is invisible to it.
    assert "and warmup if the loop has none (its learning rate is the script's own" in replay["advice"]["text"], \
        replay["advice"]
