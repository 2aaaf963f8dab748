"""A torchrun job's pause for a rank's break is left out after the TUI closes (said_once),
and with it its own `  at FILE:LINE` line only (issue 45, the closing walk's leftovers: it
left out every indented line of that rank until an unindented one, so the job's own
indented lines after a pause, a replay's `  domain:` or a new break's `  at` where no
unindented line came between, went missing from the terminal). The launcher's relay of
torchrun's stderr (EndedReport.feed, what the terminal prints) is fed the lines as the
ranks write them."""

from __future__ import annotations

from stepdbg.client.ended_report import EndedReport

LINES = [
    "[default1]:stepdbg[rank 1]: break at step 6 (before_backward) [nan]: loss is nan",
    "[default1]:  at ddp_nan.py:45  loss.backward()",
    "[default0]:stepdbg[rank 0]: break at step 6 (before_optimizer_step) [rank 1]: paused for rank 1's break at step 6: loss is nan",
    "[default0]:  at ddp_nan.py:46  opt.step()",
    "[default0]:  rank 0 grad norm 1.5",  # the job's own indented line, right after the pause
    "[default1]:stepdbg[rank 1]: break at step 6 (before_optimizer_step) [nan]: this rank broke: loss is nan",
    "[default1]:  at ddp_nan.py:46  opt.step()",
    "[default1]:  domain: log|sqrt",
    "[default0]:stepdbg[rank 0]: break at step 6 (before_optimizer_step) [rank 1]: paused for rank 1's break at step 6: loss is nan",
    "[default0]:  at ddp_nan.py:27  x = f(y)",
    "[default0]:  at ddp_nan.py:31  (a second one: not the pause's)",
    "[default0]:step 7 loss 1.2",
]


def test_a_left_out_pause_takes_only_its_own_at_line():
    report = EndedReport(auto=True)
    shown = [out for line in LINES for out in report.feed(line)]
    assert shown == [LINES[0], LINES[1], LINES[4], LINES[7], LINES[10], LINES[11]], "\n".join(shown)
