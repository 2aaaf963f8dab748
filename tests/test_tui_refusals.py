"""A newcomer's walk at 80x24 (issue 45's invariant: nothing on screen is a Python
exception's text; no stale or wrong number), each looked at where the person looks (the
toasts and the screen under Pilot), against a real job or the fake source; each failed
before its fix."""

from __future__ import annotations

import pytest
from conftest import DEMOS, text_of
from fake_source import REPLAY
from test_tui_fixes import no_exception_on_screen, real, wait_for
from test_tui_keys import log_text, started
from textual.widgets import DataTable, Input
from tui_walk import screen_text

from stepdbg.agent.replay.advice import advise
from stepdbg.client.tensor_text import format_summary
from stepdbg_tui.app import StepdbgApp


def toasts(app: StepdbgApp) -> list[str]:
    return [n.message for n in app._notifications]


def note(app: StepdbgApp, panel: str) -> str:
    """The words above a panel after the job's end ('' while it has none)."""
    return text_of(app, f"{panel} #ended-note") if app.screen.query(f"{panel} #ended-note") else ""


# ---------------------------------------------------------------------- 1, 2: refusals in words


@real
async def test_a_name_the_frame_cannot_evaluate_and_r_without_snapshots_are_said_in_words(tui_at_break):
    """Tensor (3): `foo(` said `tensor foo(: LookupError: cannot evaluate 'foo(': SyntaxError:
    '(' was never closed (<stepdbg>, line 1)`, `nosuch` said `... NameError: name 'nosuch' is
    not defined`."""
    async with tui_at_break("--break", "loss>0", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("3")
        field = app.query_one("#tensor-name", Input)
        for typed, said in (("foo(", "tensor foo(: not an expression ('(' was never closed)"),
                            ("nosuch", "tensor nosuch: no variable nosuch in this frame")):
            field.value = ""
            field.focus()
            await pilot.press(*typed, "enter")
            await wait_for(pilot, lambda said=said: said in text_of(app, "#tensor-summary"),  # (in the panel)
                           f"the words for {typed}")
            no_exception_on_screen(app)
        await pilot.press("escape", "R")  # R with no snapshots kept said `rewind: NoSnapshot: no snapshots ...`
        await wait_for(pilot, lambda: any(t.startswith("rewind: ") for t in toasts(app)), "the rewind's answer")
        said = next(t for t in toasts(app) if t.startswith("rewind: "))
        assert said.startswith("rewind: no snapshots are kept: start with --keep-every N"), said


# ---------------------------------------------------------------------- 3: panels after the end


@real
async def test_optim_and_mem_after_the_end_say_it_ended_not_a_connection_error(tui_at_break):
    """Memory (5) seen at the break at step 0, then the job runs to its end: Optim (4) and
    Memory (5) said `optimizer: Connection lost`, `memory: [Errno 32] Broken pipe` (toasts),
    Optim an empty table. Now each says the job ended and of which step it shows."""
    async with tui_at_break("--break", "loss>0", script_args=("--steps", "3")) as (app, pilot):
        assert (app.status.get("paused") or {}).get("step") == 0, app.status
        await pilot.press("5")
        await wait_for(pilot, lambda: app.query_one("#mem-largest", DataTable).row_count > 0, "the memory")
        await app.source.call("break_remove", spec="loss>0")
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the end")
        await pilot.press("4")
        await wait_for(pilot, lambda: "ended" in note(app, "OptimizerPanel"), "Optim's note")
        assert "nothing to show" in note(app, "OptimizerPanel")
        assert "ended (exit code 0)" in " ".join(screen_text(app).split())
        await pilot.press("5")
        await wait_for(pilot, lambda: "ended" in note(app, "MemoryPanel"), "Memory's note")
        assert "this shows step 0, the last step this panel saw" in note(app, "MemoryPanel")
        assert not [t for t in toasts(app) if t.startswith(("optimizer:", "memory:"))], toasts(app)
        no_exception_on_screen(app)


# ---------------------------------------------------------------------- 4: statistics beside inf


def test_the_consoles_statistics_say_they_are_of_the_finite_values():
    """`p x` of a tensor holding inf said `min 0 max 4.44 ... inf 19` as if 4.44 were its largest."""
    import torch

    from stepdbg.agent.measure.tensors import summarize

    s = summarize(torch.tensor([0.0, 4.44, float("inf"), 1.0]), "x")
    assert "finite values: min 0 max 4.44" in format_summary(s), format_summary(s)
    assert "finite values" not in format_summary(summarize(torch.tensor([0.0, 4.44]), "y"))


@real
async def test_enter_on_a_graph_tensor_with_inf_says_its_statistics_are_of_the_finite_values(tui_at_break):
    """nan_log at its break, Memory (5), Enter on `... in loss's graph` holding inf: the Tensor
    panel said `min 0 max 4.44 mean 0.8684 ... inf 19`."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        names = [str(k.value) for k in table.rows]
        seen = []
        for name in (n for n in names if "in loss's graph" in n):
            await pilot.press("5")
            table.move_cursor(row=names.index(name))
            await pilot.press("enter")
            await wait_for(pilot, lambda name=name: name in text_of(app, "#tensor-summary"), "the summary")
            summary = text_of(app, "#tensor-summary")
            if "inf 0" not in summary and "min " in summary:
                seen.append(summary)
                assert "finite values: min " in summary, summary
        assert seen, "no tensor of loss's graph with inf"


# ---------------------------------------------------------------------- 5: advice and diff once


@pytest.mark.timeout(60)
async def test_the_divergence_advice_and_a_diff_are_said_once(monkeypatch):
    """The Break panel said `divergence: divergence, not the op: ...`; after D the Log said
    `stepdbg: diff: step 1 run twice ...` (the job's own line) and then `diff: step 1 ...`."""
    import fake_source

    advice = advise({"where": "parameter"}, [], [])
    monkeypatch.setitem(fake_source.ANSWERS, "replay", lambda src: {**REPLAY, "advice": advice})
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        app.output_shown = True  # the job's output reaches the Log (a job this window started)
        await pilot.press("r")
        await wait_for(pilot, lambda: "divergence:" in " ".join(screen_text(app).split()), "the advice")
        assert "divergence: divergence" not in " ".join(screen_text(app).split())
        await pilot.press("D")
        await wait_for(pilot, lambda: ("diff", ()) in src.calls, "the diff asked")
        summary = fake_source.DIFF["summary"]
        src.push("output", [{"stream": "stderr", "lines": [f"stepdbg: diff: {summary}"]}])
        await wait_for(pilot, lambda: summary in text_of(app, "#repl-out"), "the diff's answer")  # (2cc3534: there)
        await pilot.press("9")
        await wait_for(pilot, lambda: summary[:40] in log_text(app), "the diff in the Log")
        log = log_text(app).split("\n")
        assert sum(summary[:40] in line for line in log) == 1, log
