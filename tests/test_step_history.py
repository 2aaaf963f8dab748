"""Whether a loop warms its LR up, as the advice reads it (step/step_history.py): an
optimizer's LR rising at least twice from its start before it ever falls, every param group
together, each optimizer followed on its own; kept since the start, past the records' length."""

from __future__ import annotations

import math

import pytest

from stepdbg.agent.step.step_history import StepHistory, warmed_up

WARM = [[1e-4 * (i + 1)] for i in range(4)] + [[4e-4]] * 4
COSINE = [[1e-3 * 0.5 * (1 + math.cos(math.pi * i / 10))] for i in range(10)]


@pytest.mark.parametrize(("lrs", "warm"), [
    (WARM, True),
    (COSINE, False),  # a decay never rises
    ([[1e-3]] * 3 + [[1e-2]] * 5, False),  # a live `lr X`: one jump
    ([[1e-4 * (i + 1), 1e-3] for i in range(4)], False),  # group 0 warms up, group 1 is at its peak from step 0
    ([[1e-4 * (i + 1), 1e-5 * (i + 1)] for i in range(4)], True),  # both groups (with and without weight decay)
    ([[1e-4 * (i // 3 + 1)] for i in range(12)], True),  # warmed up per epoch (LinearLR stepped each epoch)
    ([[1e-3], [2e-3]], True),  # a break at step 2: the one rise there is
    ([[]] * 4, False),  # no optimizer
])
def test_a_warmup_is_the_lr_rising_twice_before_it_falls(lrs, warm):
    assert warmed_up(lrs) is warm
    h = StepHistory(10_000)
    for lr in lrs:
        h.append({"lr": lr})
    assert h.warms_up is warm


@pytest.mark.parametrize(("rates", "warm"), [
    ([[[1e-4 * (i + 1)] for i in range(4)], [[2e-4]] * 4], True),  # a GAN: D warms up, G does not; records in turn
    ([[[1e2]] * 4, [[2e2]] * 4, [[4e2]] * 4], False),  # three optimizers at constant rates that differ
    ([[[1e-4]], [[4e-4]]], False),  # two time-scales, one record each (a break at step 2): no rise of either
])
def test_each_optimizer_is_followed_on_its_own(rates, warm):
    turn = [0]
    h = StepHistory(10_000, lambda: rates[turn[0]])  # (any object per optimizer: its id tells them apart)
    for step in range(len(rates[0])):
        for k, lrs in enumerate(rates):
            turn[0] = k
            h.append({"lr": lrs[step]})
    assert h.warms_up is warm


def test_a_warmup_is_kept_past_the_records_length():
    h = StepHistory(8)
    for i in range(100):
        h.append({"lr": [1e-4 * min(i + 1, 4)]})
    assert h.warms_up and not warmed_up([r["lr"] for r in h]) and len(h) == 8
