"""What a newcomer's walk at 80x24 met and the last session left open (issue 45): each
looked at where the person looks, the TUI under Pilot attached to a real job of its own
(conftest's tui_at_break); each failed before its fix."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap

from conftest import DEMOS, FIXTURE, ROOT, WAIT, marked_line, text_of, wait_for
from test_tui_fixes import no_exception_on_screen, real
from textual.widgets import DataTable
from tui_walk import focus_is_visible, header_text, screen_text, settled

from stepdbg_tui.memory_panel import MemoryPanel
from stepdbg_tui.panels import MODULE_NORMS, num


def words(app) -> str:
    """The screen's words, its lines joined (a sentence wraps at 80 columns)."""
    return " ".join(screen_text(app).split())


@real
async def test_the_memory_panel_opens_at_its_top_and_its_keys_reach_every_line(tui_at_break):
    """5 at 80x24: the panel opened scrolled to its table (the allocator's line and the
    categories' top out of sight), and neither Up, PageUp nor Home reached them."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("5")
        table, panel = app.query_one("#mem-largest", DataTable), app.query_one(MemoryPanel)
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        await settled(pilot, app)
        first = text_of(app, "#mem-now").splitlines()[0].strip()
        assert panel.scroll_y == 0 and first in screen_text(app), screen_text(app)
        assert "tensors by category" in screen_text(app) and app.focused is table
        lines = panel.virtual_size.height
        seen: set[int] = set()

        def in_view() -> None:
            top = round(panel.scroll_y)
            seen.update(range(top, top + panel.scrollable_content_region.height))

        in_view()
        for _ in range(
            lines + table.row_count
        ):  # Down to the panel's end (a ceiling, never reached)
            if panel.scroll_y >= panel.max_scroll_y and table.cursor_row == table.row_count - 1:
                break
            await pilot.press("down")
            await settled(pilot, app)
            in_view()
        assert panel.scroll_y == panel.max_scroll_y, (panel.scroll_y, panel.max_scroll_y)
        assert text_of(app, "#mem-plot-label").split(":")[0] in screen_text(app)
        for _ in range(lines + table.row_count):  # and Up back to its top
            if panel.scroll_y == 0 and table.cursor_row == 0:
                break
            await pilot.press("up")
            await settled(pilot, app)
            in_view()
        assert panel.scroll_y == 0 and first in screen_text(app), screen_text(app)
        assert seen >= set(range(lines)), sorted(set(range(lines)) - seen)
        await pilot.press("end")
        await settled(pilot, app)
        assert panel.scroll_y == panel.max_scroll_y
        await pilot.press("home")
        await settled(pilot, app)
        assert panel.scroll_y == 0 and first in screen_text(app)
        no_exception_on_screen(app)


@real
async def test_at_an_oom_break_the_memory_panel_opens_at_its_top_with_the_focus_in_sight(
    tui_at_break,
):
    """oom_batch at its out-of-memory break, 5 at 80x24: the cause's lines above the table
    fill the view from the panel's top, so the focus is on the panel (its keys scroll it;
    Tab reaches the table), not on a table out of sight."""
    async with tui_at_break("--record-memory", script=DEMOS / "oom_batch.py") as (app, pilot):
        await pilot.press("5")
        table, panel = app.query_one("#mem-largest", DataTable), app.query_one(MemoryPanel)
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        await settled(pilot, app)
        assert "out of memory" in words(app) and panel.scroll_y == 0, screen_text(app)
        assert focus_is_visible(app), app.focused
        await pilot.press("end")
        await settled(pilot, app)
        assert panel.scroll_y == panel.max_scroll_y > 0
        await pilot.press("home")
        await settled(pilot, app)
        assert panel.scroll_y == 0 and "out of memory" in words(app)
        no_exception_on_screen(app)


@real
async def test_after_i_the_break_panel_says_the_interrupt_and_the_header_keeps_the_host(
    tui_at_break,
):
    """ctrl+c, i on a served job: the Break panel said `Its output went where it runs
    (started with --forward-output, ...)`, and the header, `step 3 · ended · job ended, exit
    code 130` beside a clock still counting, had left the host out."""
    async with tui_at_break("--break", "step==3", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: "Which do you mean?" in screen_text(app), "the question")
        await pilot.press("i")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await settled(pilot, app)
        said = words(app)
        assert "--forward-output" not in said, said
        assert (
            "the job ended (exit code 130) after the Ctrl-C sent from this window (its Ctrl-C dialog): its own Ctrl-C "
            "handling ran, and what it printed then (a traceback) is where it runs"
        ) in said, said
        header, host = header_text(app), app.source.session["host"]
        assert (
            "step 3 · job ended, exit code 130" in header and "ended · job ended" not in header
        ), header
        assert not re.search(r"\d\d:\d\d:\d\d", header), (
            header
        )  # no clock counting on after the end
        if len(host) <= 20:  # (80 columns: pid, script, host and the end fit beside each other)
            assert f"@ {host}" in header, header


@real
async def test_the_threads_view_shows_the_persons_frames_only(tui_at_break):
    """8 at a pause: the training thread's stack ended in `[14 frames of stepdbg hidden]`
    (its pause is inside stepdbg's hooks); a Ctrl-C's traceback shows none since 38c1909."""
    async with tui_at_break("--break", "step==2", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("8")
        await wait_for(pilot, lambda: "MainThread" in text_of(app, "#threads-text"), "the threads")
        shown = text_of(app, "#threads-text")
        assert f"train_loop.py:{marked_line(FIXTURE, 'forward')}" in shown, shown
        assert "hidden" not in shown and "stepdbg/" not in shown and "<stepdbg>" not in shown, shown
        assert "frames of stepdbg" not in screen_text(app)


@real
async def test_a_modules_w_and_its_first_parameters_norm_say_what_each_is(tui_at_break):
    """2, Enter on `0` (Linear): the Model panel's |w| and the Tensor panel's norm differed
    with nothing to say why (|w| counts the bias too). Both say what they are, and the
    numbers bear it out: |w|² = |weight|² + |bias|²."""
    async with tui_at_break("--break", "step==2", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("2")
        table = app.query_one("#model-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 4, "the modules")
        await settled(pilot, app)
        assert MODULE_NORMS in words(app), words(app)
        row = app.query_one("ModelPanel").rows["0"]
        table.move_cursor(row=[str(k.value) for k in table.rows].index("0"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "norm" in text_of(app, "#tensor-summary"), "the summary")
        summary = " ".join(text_of(app, "#tensor-summary").split())
        assert (
            f"0 (Linear): its first parameter model.0.weight (the Model panel's |w| {num(row['weight_norm'], 3)} is of all "
            "its own parameters together)"
        ) in summary, summary
        weight = float(summary.split("norm ")[1].split()[0])
        bias = (await app.source.summary("model[0].bias"))["norm"]
        assert math.isclose(math.hypot(weight, bias), row["weight_norm"], rel_tol=1e-3), (
            weight,
            bias,
            row,
        )
        no_exception_on_screen(app)


# ---------------------------------------------------------------------- s: the console's step, the TUI's, the docs'

STEPPING = """
    import os, torch, stepdbg
    from torch import nn
    stepdbg.watch("step==1", on_break="pause", serve=os.environ.get("SERVE") == "1")
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
    print("done")
"""
PAUSE = re.compile(r"break at step (\d+) \((\w+)\) \[pause\]")


@real
async def test_s_stops_where_the_console_and_the_docs_say(tmp_path, private_runtime_dir):
    """s, n, s from a break at step 1 (before_forward): the TUI's pauses are the console's
    (the reference), and the console's help, the TUI's help (?) and docs/tui.md say what
    they are: the same pause point, a step on (each said `next step`)."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(STEPPING))
    console = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        input="h\ns\nn\ns\nc\n",
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "STEPDBG_CONSOLE": "1"},
    )
    assert console.returncode == 0, console.stderr
    assert "s | step        the same pause point of the next step" in console.stderr, console.stderr
    expected = [(int(s), p) for s, p in PAUSE.findall(console.stderr)]
    assert expected == [(2, "before_forward"), (2, "after_forward"), (3, "after_forward")], (
        console.stderr
    )

    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    job = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SERVE": "1"},
    )
    try:
        from stepdbg.wire import sessions

        await wait_for_listing(sessions)
        client = await AsyncClient.connect()
        app = StepdbgApp(client)
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the break")
            for key in "sns":
                before = app.status.get("paused")
                await pilot.press(key)
                await wait_for(
                    pilot,
                    lambda before=before: (
                        app.status.get("state") == "paused"
                        and app.status.get("paused") is not before
                    ),
                    f"the pause after {key}",
                )
                seen.append((app.status["step"], app.status["phase"]))
                assert f"step {seen[-1][0]} · {seen[-1][1]} · PAUSED" in header_text(app)
            await pilot.press("question_mark")
            await wait_for(
                pilot, lambda: "s same pause point, next step" in words(app), "the help's s"
            )
            await pilot.press("escape")
            app.exit(None)
        await client.close(then="continue")
        assert seen == expected
    finally:
        job.kill()
        job.wait()
    docs = " ".join((ROOT / "docs" / "tui.md").read_text().split())
    assert "| `s` | the same pause point of the next step |" in docs
    assert "`s` the same pause point of the next step" in docs


async def wait_for_listing(sessions) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + WAIT
    while not sessions.listing():
        assert time.monotonic() < deadline, "the job never announced its session"
        await asyncio.sleep(0.05)


async def test_the_consoles_stepping_words_on_the_repl_line_name_their_key(tui_at_break):
    """`continue` on the REPL line said `SyntaxError: 'continue' not properly in loop`, `c`
    `NameError: name 'c' is not defined`, and `info history` `SyntaxError` (the README says the
    console's words are typed there). Where the frame has no such name, the answer names the
    key; the job does not move (typed text never drives it)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status.get("step")
        for line, key in (("continue", "c"), ("c", "c"), ("n", "n")):  # (`next` is a builtin: Python answers)
            await pilot.click("#repl")
            await pilot.press(*line, "enter")
            said = f"{line} is the console's word; here it is the key {key}"
            await wait_for(pilot, lambda said=said: said in text_of(app, "#repl-out"), said)
            no_exception_on_screen(app)
        await pilot.click("#repl")
        await pilot.press(*"info history", "enter")
        await wait_for(pilot, lambda: "the Plots panel (6) shows it" in text_of(app, "#repl-out"), "the Plots panel")
        assert app.status.get("step") == step and app.status.get("paused"), app.status
