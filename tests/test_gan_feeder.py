"""A NaN break at netD's loss names the generator only where a generator's output holds
the NaN (step/upstream.py: feeder): not when netG's finite output sits in a torch.cat beside
real data that holds it, nor when the program's own log between the models made it; the
generator that made it of two; and a `fake.detach().clone()` (no storage or graph shared).
The replay (replay/upstream.py: born_upstream) names the same generator's op; the program's
own log (born_in_program) where autograd kept its finite input; and, where an op kept only
its result (a tanh of the data's NaN plus netG's output), no op: it says it cannot tell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import marked_line
from torch import nn


class Gen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bad = nn.Linear(3, 5), False

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.fc(z))
        return y * float("nan") if self.bad else y


def gan(session_factory, tmp_path, case: str, actions: tuple[str, ...]) -> list[dict]:
    """The loop of `case` under an in-process agent; its report's lines."""
    report = tmp_path / "r.jsonl"
    s = session_factory("nan", actions=actions, report=str(report))
    torch.manual_seed(0)
    netG, netG2, netD = Gen(), Gen(), nn.Linear(5, 1)
    opt_d = torch.optim.SGD(netD.parameters(), lr=0.01)
    for step in range(3):
        netG2.bad, netG.bad = step == 2 and case == "second_generator", step == 2 and case == "detached_clone"
        real = torch.randn(4, 5)
        if step == 2 and case in ("nan_in_real", "data_through_tanh", "written_without_grad"):
            real[0, 0] = float("nan")
        if case == "inline_detached":  # netD(netG(z).detach()): netG's output is freed, its alias held
            netG.bad = step == 2
            inputs = netG(torch.randn(4, 3)).detach()
        elif case == "inplace_log":  # the program's own in-place sqrt of netG's freed output's memory
            inputs = netG(torch.randn(4, 3)).detach()
            if step == 2:
                inputs.sub_(2).sqrt_()  # @inplace-log
        else:
            fake, fake2 = netG(torch.randn(4, 3)), netG2(torch.randn(4, 3))
        if case == "detached_clone":
            inputs = fake.detach().clone()
        elif case == "log_between":
            inputs = torch.log(fake + (-2 if step == 2 else 2))  # @log-between
        elif case == "data_through_tanh":  # the data's NaN, through an op that keeps only its result
            inputs = torch.tanh(real + fake)
        elif case == "written_without_grad":  # real pixels pasted into a copy of netG's output, autograd off
            inputs = fake.clone()
            with torch.no_grad():
                inputs[:, :2] = real[:, :2]
        elif case not in ("inline_detached", "inplace_log"):
            inputs = torch.cat([real, fake, fake2])
        opt_d.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(netD(inputs), torch.zeros(len(inputs), 1)).backward()
        opt_d.step()
    s.stop()
    return [json.loads(line) for line in report.read_text().splitlines()]


CASES = [("nan_in_real", None), ("log_between", None), ("second_generator", "netG2"), ("detached_clone", "netG"),
         ("inline_detached", None), ("data_through_tanh", None), ("written_without_grad", None),
         ("inplace_log", None)]  # (its break: netG's output's memory, which a replay of netG verifies)


@pytest.mark.parametrize(("case", "fed_by"), CASES)
def test_the_nan_break_names_the_generator_whose_output_holds_the_nan(session_factory, tmp_path, case, fed_by):
    (brk,) = [r for r in gan(session_factory, tmp_path, case, ("report",)) if r.get("event") == "break"]
    assert brk["details"].get("fed_by") == fed_by, brk
    if fed_by:
        assert f"it is {fed_by}'s output, born in {fed_by}'s forward" in brk["reason"], brk
    elif case in ("inline_detached", "inplace_log"):  # netG's output freed: its memory's values are not known to be its
        assert "it holds the memory of netG's output, freed since" in brk["reason"], brk
    elif case == "log_between":  # computed from netG's output by the program: not the data, not netG's
        assert "the program computed it from a model's output" in brk["reason"] and "netG" not in brk["reason"], brk
    else:  # computed from netG's output and the data: what autograd kept does not tell which (not "the program's")
        assert "computed in this step from a model's output" in brk["reason"] and "netG" not in brk["reason"], brk


@pytest.mark.parametrize(("case", "fed_by"), CASES)
def test_the_replay_names_the_generators_op(session_factory, tmp_path, case, fed_by):
    (replay,) = [r for r in gan(session_factory, tmp_path, case, ("replay",)) if r.get("event") == "replay"]
    first = replay["first_nonfinite"]
    if case == "log_between":  # the program's own log, at its line: it said "the data: inputs holds ..."
        assert (first["where"], first["op"], first["line"], first["into"]) == (
            "program", "log", marked_line(Path(__file__), "log-between"), "netD"), first
        assert "log in the program's own code produced the first non-finite value" in replay["summary"], replay
    elif case == "inplace_log":  # netG's forward, replayed, is finite: the program wrote it (it said "the data")
        assert (first["where"], first["op"], first["written_after"], first["line"]) == (
            "program", "sqrt", "netG", marked_line(Path(__file__), "inplace-log")), first
        assert replay["summary"].startswith("sqrt in the program's own code wrote inputs's non-finite values after "
                                            "netG made them"), replay
        assert replay["advice"]["cause"] == "domain", replay
    elif fed_by or case == "inline_detached":
        fed_by = fed_by or "netG"
        assert (first["where"], first["module"], first["op"], first["fed"]["model"]) == ("forward", fed_by, "mul",
                                                                                          fed_by), first
    else:  # (the tanh of a NaN is no producer: it keeps only its result, which says nothing of its input)
        assert first["where"] == "input" and "fed" not in first and first["computed"] is True, first
        assert replay["summary"].startswith("the data, a model or the ops between: inputs already holds"), replay


def test_a_program_op_called_on_two_lines_of_the_loop_gets_no_line():
    """The line of a program's op is guessed from the paused function's source: where two
    lines call it (the glue's log and a GAN loss written with log), no line is named, not
    the last of them (the attack's f4: the advice would have had the loss's log clamped)."""
    import sys

    from stepdbg.agent.replay.autograd_graph import search_input_graph

    fake = torch.tanh(torch.randn(4, 5, requires_grad=True)) - 2
    inputs = torch.log(fake)  # the glue
    loss_like = -torch.log(torch.sigmoid(torch.ones(1)) + 1e-8)  # a loss written with log
    first = search_input_graph(inputs, sys._getframe())
    assert (first["op"], first["line"]) == ("log", None) and loss_like.isfinite().all(), first


def test_the_break_panel_names_the_programs_op_as_the_programs(session_factory, tmp_path):
    """The TUI's Break panel said '(loss computation)' for the module of an op the program
    ran between two models."""
    from rich.console import Console

    from stepdbg_tui.break_panel import render_replay

    (replay,) = [r for r in gan(session_factory, tmp_path, "log_between", ("replay",)) if r.get("event") == "replay"]
    console = Console(width=160, record=True)
    for line in render_replay(replay):
        console.print(line)
    text = console.export_text()
    assert "module (the program's own code) (-)  op log" in text and "loss computation" not in text, text


def test_a_program_op_is_looked_for_by_its_own_name_and_a_copy_makes_no_nan():
    """A div is not a divmod (the re-attack's decoy line); a clone whose output holds a NaN
    its finite input did not is no producer: the copy was written in place, autograd off."""
    import sys

    from stepdbg.agent.replay.autograd_graph import search_input_graph

    epoch, it = divmod(7, 2)
    fake = torch.tanh(torch.randn(4, 5, requires_grad=True))
    inputs = torch.div(fake, fake - fake)  # 0/0
    first = search_input_graph(inputs, sys._getframe())
    assert (first["op"], first["code"]) == ("div", "inputs = torch.div(fake, fake - fake)  # 0/0"), first
    copy = fake.clone()
    with torch.no_grad():
        copy[0, 0] = float("nan")
    assert search_input_graph(copy, sys._getframe()) is None and (epoch, it) == (3, 1)
