"""Whether a loop warms its LR up, as the advice reads it (step/step_history.py): every param
group's LR rising two steps running, over one record or, for two optimizers taking turns
(a GAN's), over two; kept since the start, past the records' length."""

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
    ([x for pair in zip(WARM, [[2e-4]] * 8, strict=True) for x in pair], True),  # D's and G's records in turn
    ([[1e-4 * (i + 1), 1e-3] for i in range(4)], False),  # group 0 warms up, group 1 is at its peak from step 0
    ([[1e-4 * (i + 1), 1e-5 * (i + 1)] for i in range(4)], True),  # both groups (with and without weight decay)
    ([[]] * 4, False),  # no optimizer
])
def test_a_warmup_is_every_groups_lr_rising_two_steps_running(lrs, warm):
    assert warmed_up(lrs) is warm
    h = StepHistory(10_000)
    for lr in lrs:
        h.append({"lr": lr})
    assert h.warms_up is warm


def test_a_warmup_is_kept_past_the_records_length():
    h = StepHistory(8)
    for i in range(100):
        h.append({"lr": [1e-4 * min(i + 1, 4)]})
    assert h.warms_up and not warmed_up([r["lr"] for r in h]) and len(h) == 8
