"""Attacks on the fold of torchrun's traceback of a Ctrl-C (880e764): a rank's own traceback
of the Ctrl-C is the user's, shown whole, even where its frames run through torch.distributed
(the script was in dist.all_reduce, or wrapped by torch.distributed.elastic's @record): it was
taken for torchrun's and hidden, the line saying torchrun's traceback was not shown. And what
the fold holds (a traceback's lines until its last) is said when the stream ends before it,
and is never more than HELD_MOST lines: a rank's output after a line that looked like a
traceback's first was held, unseen, until a line not indented came."""

from __future__ import annotations

from stepdbg.client.ended_report import HELD_MOST, EndedReport

SITE = "/venv/lib/python3.11/site-packages/torch/distributed"
RANKS_OWN = [
    "Traceback (most recent call last):",
    '  File "/home/you/train.py", line 52, in <module>',
    "    main()",
    f'  File "{SITE}/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
    "    return f(*args, **kwargs)",
    '  File "/home/you/train.py", line 40, in main',
    "    dist.all_reduce(t)",
    f'  File "{SITE}/c10d_logger.py", line 83, in wrapper',
    "    return func(*args, **kwargs)",
    f'  File "{SITE}/distributed_c10d.py", line 2501, in all_reduce',
    "    work.wait()",
    "KeyboardInterrupt",
]


def _interrupted() -> EndedReport:
    report = EndedReport(auto=True)
    report.interrupted = True
    return report


def test_a_ranks_traceback_through_torch_distributed_is_the_users_and_shown():
    report = _interrupted()
    shown = [out for line in RANKS_OWN for out in report.feed(line)]
    assert shown == RANKS_OWN, shown
    assert (report.hid, report.signalled) == (False, False)


def test_a_traceback_cut_by_the_streams_end_is_said_at_the_end():
    report = _interrupted()
    shown = [out for line in RANKS_OWN[:5] for out in report.feed(line)]
    assert shown + report.end() == RANKS_OWN[:5]
    assert report.end() == []  # (said once)


def test_what_the_fold_holds_is_bounded():
    report = _interrupted()
    lines = ["Traceback (most recent call last):", *(f"    row {i}" for i in range(10 ** 5))]
    shown = [out for line in lines for out in report.feed(line)]
    assert len(report._held) <= HELD_MOST
    assert shown + report.end() == lines


def test_the_terminal_gets_a_traceback_the_stream_cut(private_runtime_dir, capsys):
    """`stepdbg --no-tui ... torchrun`'s stderr: torchrun's last lines, a traceback cut by its
    end (killed as it wrote it), reach the terminal."""
    import signal
    import sys

    from stepdbg.cli.run import run_torchrun

    cut = "".join(f"{line}\n" for line in RANKS_OWN[:5])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = run_torchrun([sys.executable, "-c", f"import sys; sys.stderr.write({cut!r}); sys.exit(1)"], {})
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert code == 1
    assert capsys.readouterr().err.splitlines() == RANKS_OWN[:5]
