"""A condition that stays true is counted once a step, whatever the pause points it held
at, and a condition held at two pause points of its own break's step is no repeat at all:
the end said 'nan on 0 more steps' after `k` then `c` (the closing walk of issue 45; the
README's transient sample and test_attack_serve's end both met it)."""

from stepdbg.agent.breaks.breakpoints import Breakpoints


def test_a_condition_held_at_two_pause_points_of_its_break_step_is_no_repeat():
    b = Breakpoints(["nan"])
    assert not b.repeat("nan", 17)  # the break
    assert b.repeat("nan", 17)  # the same step, a later pause point: one break still
    assert b.repeats == {}


def test_each_later_step_it_stays_true_on_counts_once():
    b = Breakpoints(["nan"])
    b.repeat("nan", 17)
    for step in (18, 18, 19, 20, 20):
        assert b.repeat("nan", step)
    assert b.repeats == {"nan": 3}
