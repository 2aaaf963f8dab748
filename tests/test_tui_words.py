"""What the TUI says, in words, and the Log's order (issue 45, items 10 and 8), each looked
at where the person looks (the screen under Pilot), against the fake source; each failed
before its fix."""

from __future__ import annotations

import pytest
from conftest import text_of
from fake_source import HISTORY
from test_tui_fixes import no_exception_on_screen, wait_for
from test_tui_keys import log_text, started
from textual.widgets import TabbedContent
from tui_walk import header_text, screen_text

# ---------------------------------------------------------------------- item 10: words


@pytest.mark.timeout(60)
async def test_an_lr_change_and_c_after_the_end_are_said_in_words():
    """The Log says an LR change as the REPL line does (it said `lr lr=0.001, pinned=True,
    groups=[{'group': 0, ...}]`); c after the end says the job ended (it said `the job is
    not paused`)."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        src.push("change", {"what": "lr", "step": 30, "lr": 0.001, "pinned": True,
                            "groups": [{"group": 0, "lr": 0.001, "initial_lr": 0.01}]})
        src.push("exited", {"exit_code": 0, "steps": 60})
        await wait_for(pilot, lambda: "ended" in header_text(app), "the end")
        await pilot.press("9")
        await wait_for(pilot, lambda: "change at step 30: LR set to 0.001 and pinned (param group 0)"
                       in log_text(app), "the change in the Log")
        assert "groups=[" not in log_text(app)
        await pilot.press("c")
        said = "the job has ended (exit code 0): nothing to continue. The panels still show its last values; q quits"
        await wait_for(pilot, lambda: [str(n.message) for n in app._notifications] == [said], "c's answer")  # (a key
        assert said not in text_of(app, "#repl-out")  # pressed on a panel: its toast alone, the eighteenth walk's leftovers 3)
        assert ("cont", ()) not in src.calls


@pytest.mark.timeout(60)
@pytest.mark.parametrize("output", [False, True])
async def test_the_end_says_where_the_jobs_output_is(output):
    """At the end the Break panel says the Log has the job's output when it came there, else
    where it went (it said `(attached to a job, only with --forward-output)` to a job the
    TUI had launched, whose output the Log had)."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await pilot.pause()
        if output:
            src.push("output", [{"stream": "stdout", "lines": ["step 0 loss 1.0"]}])
        src.push("exited", {"exit_code": 0, "steps": 60})
        await wait_for(pilot, lambda: "ended" in header_text(app), "the end")
        await pilot.press("1")
        said = "The Log (9) has what it printed" if output else "Its output went where the job runs, not to this window"
        await wait_for(pilot, lambda: said in " ".join(screen_text(app).split()), "the end's words")
        assert "attached to a job" not in screen_text(app)


@pytest.mark.timeout(60)
async def test_the_memory_plots_axis_tells_its_ticks_apart(monkeypatch):
    """Memory that moved by under 1MB (323.0MB to 323.9MB): the value axis reads 323MB,
    323.2MB, ... (it read `323MB 323MB 323MB`)."""
    import re

    import fake_source

    memory = fake_source.ANSWERS["memory"]
    monkeypatch.setitem(fake_source.ANSWERS, "memory", lambda src: {**memory(src), "now": 323_900_000})
    src, app, ctx = await started(size=(160, 48))
    async with ctx as pilot:
        await wait_for(pilot, lambda: len(app.history) == 30, "the history")
        app.history = [{**h, "mem": 323_000_000 + 30_000 * h["step"]} for h in HISTORY]
        await pilot.press("5")
        plot = app.query_one("#mem-plot")
        await wait_for(pilot, lambda: "MB" in screen_text(app), "the plot")
        rows = screen_text(app).splitlines()[plot.region.y:plot.region.bottom]
        ticks = re.findall(r"\d+(?:\.\d+)?MB", "\n".join(rows))
        assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks


@pytest.mark.timeout(60)
async def test_a_replay_another_client_ran_is_shown():
    """Another client replays the paused step: its answer (the replay event) shows in the
    Break panel, which said `press r to replay` beside it."""
    from fake_source import REPLAY

    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await wait_for(pilot, lambda: "press r to replay" in " ".join(screen_text(app).split()), "the hint")
        src.push("replay", dict(REPLAY))
        await wait_for(pilot, lambda: "press r to replay" not in " ".join(screen_text(app).split()), "the replay")
        assert "log in features (LogFeatures) produced the first non-finite value" in " ".join(screen_text(app).split())
        assert ("replay", ()) not in src.calls


# ---------------------------------------------------------------------- item 8: the Log's order


@pytest.mark.timeout(60)
async def test_the_log_shows_a_break_once_with_its_place_under_it():
    """The job's stderr says a break in two lines (`stepdbg: break at step 30 ...` and `  at
    FILE:52  loss.backward()`): the Log shows it from the break event, after the job's lines
    before it, its place under it once (the `at` line stood alone before the break's own)."""
    from fake_source import BREAK, DEMO_FILE

    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await pilot.pause()
        said = [f"stepdbg: break at step 30 (before_backward) [nan]: {BREAK['reason']}",
                f"  at {DEMO_FILE}:52  loss.backward()"]
        src.push("output", [{"stream": "stdout", "lines": ["step 20 loss 0.7733"]},
                            {"stream": "stderr", "lines": said}])
        src.paused = dict(BREAK)
        src.push("break", dict(BREAK))
        src.push("paused", dict(BREAK))
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "break", "the Break panel")
        await pilot.press("9")
        await wait_for(pilot, lambda: "paused at step 30" in screen_text(app), "the Log")
        lines = [ln.strip() for ln in screen_text(app).splitlines()]
        at = f"at {DEMO_FILE}:52  loss.backward()"
        first = next(i for i, ln in enumerate(lines) if ln.startswith("break at step 30 [nan]"))
        assert lines.index("step 20 loss 0.7733") < first < lines.index(at), lines
        assert lines.count(at) == 1 and not [ln for ln in lines if ln.startswith("stepdbg: break")], lines
        no_exception_on_screen(app)


# ---------------------------------------------------------------------- item 10: overfit's finding, once

CANNOT = ("the loss went from 1.422 to 1.42 (best 1.42) in 100 steps on one batch: it cannot fit even one "
          "batch")
ADVICE = ("check for frozen layers (requires_grad), a too-low LR, the loss reduction (sum vs mean) and that "
          "targets match the outputs")


def test_overfits_verdict_is_one_finding_said_once_with_its_advice(capsys, monkeypatch):
    """`stepdbg overfit`'s summary at 80 columns: the verdict that it cannot fit is said once,
    in its box, with its advice, and the count names it (the box and then the same finding
    as a block said it twice); another finding is listed under it as before."""
    from stepdbg_tui.doctor import show

    monkeypatch.setenv("COLUMNS", "80")
    verdict = {"rule": "cannot_overfit", "severity": "error", "step": 100, "message": CANNOT, "advice": ADVICE}
    show([verdict], 100, 1, {"reached_near_zero": False, "verdict": CANNOT})
    out = capsys.readouterr().out
    words = " ".join(out.replace("│", " ").split())
    assert words.count("it cannot fit even one batch") == 1 and words.count("try:") == 1, out
    assert f"try: {ADVICE}" in words and "error cannot_overfit (step 100)" in words, out
    assert words.endswith("stepdbg overfit: 1 finding in 100 steps: the one above"), out
    assert max(len(line) for line in out.splitlines()) <= 80, out

    other = {"rule": "stale_grad", "severity": "warning", "step": 3, "message": "grads grew by 2x", "advice": "a"}
    show([verdict, other], 100, 1, {"reached_near_zero": False, "verdict": CANNOT})
    words = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert words.count("cannot fit") == 1 and "2 findings in 100 steps: the one above, and" in words, words
    assert "warning stale_grad (step 3) grads grew by 2x" in words, words


@pytest.mark.slow
def test_overfit_on_the_demo_prints_its_verdict_once():
    """`stepdbg overfit python demos/cannot_overfit.py` at 80 columns, as a person runs it:
    its summary (stdout) says the verdict once, with its advice, exit code 1. (The agent's
    own line on stderr during the run is the job's, as for every doctor finding.)"""
    import os
    import subprocess
    import sys

    from conftest import DEMOS, ROOT

    run = subprocess.run([sys.executable, "-m", "stepdbg", "overfit", sys.executable, str(DEMOS / "cannot_overfit.py")],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, stdin=subprocess.DEVNULL,
                         env={**os.environ, "COLUMNS": "80"})
    words = " ".join(run.stdout.replace("│", " ").split())
    assert run.returncode == 1, run.stderr[-2000:]
    assert words.count("cannot fit even one batch") == 1 and words.count("try:") == 1, run.stdout
    assert "Traceback" not in run.stderr, run.stderr[-2000:]


@pytest.mark.timeout(60)
async def test_the_consoles_info_and_locals_on_the_repl_line_open_their_panels():
    """`info mem` typed on the REPL line said `SyntaxError: invalid syntax`, and `locals`
    printed `<built-in function locals>` (a newcomer's walk: the README says the console's
    words work there). They name the panel that shows it and open it."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        for line, panel, said in (("info mem", "memory", "the Memory panel (5) shows it"),
                                  ("info opt", "optimizer", "the Optimizer panel (4) shows it"),
                                  ("locals", "break", "the Break panel (1) shows them, scrolled to them")):
            await pilot.click("#repl")
            await pilot.press(*line, "enter")
            await wait_for(pilot, lambda said=said: said in text_of(app, "#repl-out"), said)
            assert app.query_one(TabbedContent).active == panel
            no_exception_on_screen(app)
        assert not any(c[0] == "eval" and c[1][0] in ("info mem", "info opt", "locals") for c in src.calls), src.calls
