"""The condition grammar: one spelling, precise refusals."""

from __future__ import annotations

import math

import pytest

from stepdbg.wire.conditions import ConditionError, parse


@pytest.mark.parametrize(
    ("spec", "kind", "phase", "threshold"),
    [
        ("nan", "nan", "any", None),
        ("inf", "nan", "any", None),
        ("nonfinite", "nan", "any", None),
        ("grad_norm>100", "grad_norm", "before_optimizer_step", 100.0),
        ("grad_norm > 1e3", "grad_norm", "before_optimizer_step", 1000.0),
        ("loss>4", "loss", "before_backward", 4.0),
        ("loss_spike>3", "loss_spike", "before_backward", 3.0),
        ("data_wait>2", "data_wait", "before_forward", 2.0),
        ("data_wait>500ms", "data_wait", "before_forward", 0.5),
        ("step==12", "step", "before_forward", 12),
        ("every=50", "every", "before_forward", 50),
        ("mem>8GB", "mem", "before_optimizer_step", 8e9),
        ("mem>512MiB", "mem", "before_optimizer_step", 512 * 2**20),
        ("exception", "exception", "exception", None),
        ("stall>60", "stall", "watchdog", 60.0),
        ("activations", "activations", "forward", None),
        ("stale_grad", "stale_grad", "any", None),
    ],
)
def test_every_spec_parses(spec, kind, phase, threshold):
    c = parse(spec)
    assert (c.kind, c.phase, c.threshold, c.spec) == (kind, phase, threshold, spec)


def test_expr_is_evaluated_where_all_its_names_are_known():
    c = parse("expr:loss > 4 and step > 100")
    assert c.kind == "expr" and c.names == ("loss", "step") and c.phase == "before_backward"
    assert parse("expr:grad_norm / max(loss, 1e-8) > 10").phase == "before_optimizer_step"
    assert c.check({"loss": 5.0, "step": 101}) == "loss > 4 and step > 100 is true (loss=5, step=101)"
    assert c.check({"loss": 5.0, "step": 100}) is None
    assert c.check({"loss": None, "step": 101}) is None  # not known yet: does not fire


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "empty condition"),
        ("los>1", "unknown condition 'los'"),
        ("grad_norm", "grad_norm needs a value, e.g. 'grad_norm>100'"),
        ("grad_norm<3", "grad_norm takes '>'"),
        ("grad_norm>abc", "'abc' is not a number"),
        ("loss>2 or step>9", "more than one test is an expression: 'expr:loss>2 or step>9'"),
        ("grad_norm>nan", "threshold must be finite"),
        ("data_wait>soon", "is not a duration"),
        ("mem>8XB", "is not a size"),
        ("step==1.5", "is not a whole number of steps"),
        ("every=0", "every needs a step count of at least 1"),
        ("loss_spike>-1", "a spike is a factor above 1 of the running median"),  # (the fourth walk's 17: never fired)
        ("loss_spike>1", "e.g. 'loss_spike>3' (not '1')"),
        ("expr:", "needs an expression"),
        ("expr:loss >", "syntax error at the end of 'loss >': it stops short"),  # Python says column 0
        ("expr:loss $ 3", "syntax error at column 6 of the expression 'loss $ 3'"),
        ("expr:los > 1", "unknown name 'los'"),
        ("expr:__import__('os')", "only abs, min, max may be called"),
        ("expr:loss.real > 1", "'loss.real' is not allowed: each name is one number already: write loss alone"),
        ("expr:1 > 0", "uses no step scalar"),
    ],
)
def test_malformed_specs_are_refused_with_what_is_wrong(spec, problem):
    with pytest.raises(ConditionError) as e:
        parse(spec)
    assert problem in str(e.value)
    assert repr(spec) in str(e.value)


def test_threshold_checks_say_why_in_one_sentence():
    assert parse("grad_norm>100").check({"grad_norm": 250.0}) == "gradient norm 250 is above 100"
    assert parse("grad_norm>100").check({"grad_norm": 50.0}) is None
    assert parse("loss_spike>3").check({"loss": 9.0, "loss_median": 2.0}).startswith("loss 9 is 4.5x")
    assert parse("loss_spike>3").check({"loss": 9.0, "loss_median": None}) is None
    assert parse("every=10").check({"step": 0}) is not None  # every=N fires at step 0, N, 2N...
    assert parse("every=10").check({"step": 5}) is None
    assert parse("every=10").check({"step": 20}) is not None
    assert parse("step==3").check({"step": 3}) == "reached step 3"
    assert parse("mem>1GB").check({"mem": 2e9}) == "memory 2GB is above 1GB"
    assert parse("loss>1").check({"loss": math.inf}) is not None


def test_a_breakpoint_removed_while_off_comes_back_on():
    from stepdbg.agent.breaks.breakpoints import Breakpoints

    b = Breakpoints(["nan"])
    b.add("loss>4")
    b.enable("loss>4", False)
    b.remove("loss>4")
    b.add("loss>4")
    assert [r["enabled"] for r in b.listing()] == [True, True]


@pytest.mark.parametrize("spec", ["expr:9**9**9 < step", "expr:10**10**(step-94) < 0", "expr:loss**step > 1",
                                  "expr:2**1000 < loss"])
def test_a_power_that_could_hold_the_training_thread_is_refused(spec):
    with pytest.raises(ConditionError, match=r"\*\* takes a number up to 64 as its exponent"):
        parse(spec)


def test_conditions_compute_in_floats_so_no_value_makes_them_slow():
    # Every operand is a float: a huge product overflows to inf at once instead of
    # building an integer of millions of digits on the training thread.
    c = parse("expr:step*step*step*step*step*step*step*step > 1e300 or grad_norm**2 > 100")
    assert c.check({"step": 10**40, "grad_norm": 1.0})
    assert parse("expr:step % 2 == 0").check({"step": 4}) == "step % 2 == 0 is true (step=4)"


def test_a_refused_part_of_an_expression_is_quoted_with_what_to_type_instead():
    """The TUI showed `Attribute is not allowed in a condition`, and `expr:loss[0] > 1` was
    taken, then raised `TypeError ('float' object is not subscriptable)` at every step (each
    name is one number: lr is param group 0's); and a bad size was quoted lowercased."""
    with pytest.raises(ConditionError, match=r"'loss.item' is not allowed: .* write loss alone"):
        parse("expr:loss.item > 1")
    with pytest.raises(ConditionError, match=r"'lr\[0\]' is not allowed: .* write lr alone"):
        parse("expr:lr[0] > 0.1")
    with pytest.raises(ConditionError, match=r"'12xB' is not a size"):
        parse("mem>12xB")
    with pytest.raises(ConditionError, match=r"unknown condition 'Foo'"):
        parse("Foo>3")


def test_a_condition_is_a_line_not_a_program():
    with pytest.raises(ConditionError, match=r"100006 characters long; at most 1000 are accepted"):
        parse("expr:" + "loss+" * 20_000 + "1")


def test_a_breakpoint_added_twice_is_set_once():
    from stepdbg.agent.breaks.breakpoints import Breakpoints

    breaks = Breakpoints(["nan"])
    first = breaks.add("grad_norm>100")
    assert breaks.add("grad_norm>100") is first and breaks.specs() == ["nan", "grad_norm>100"]


def test_the_breakpoints_listing_says_where_each_condition_is_checked():
    from stepdbg.agent.breaks.breakpoints import Breakpoints

    listing = {b["spec"]: b["phase"] for b in Breakpoints(["nan", "grad_norm>10", "stale_grad"]).listing()}
    assert listing == {"nan": "before_backward, before_optimizer_step", "grad_norm>10": "before_optimizer_step",
                       "stale_grad": "before_backward"}  # not "any"


def test_a_nan_that_stays_is_one_break_and_counted_once_a_step(session_factory):
    """30 steps with a NaN loss: one break, and the end says nan stayed true on 29 more
    steps (it counted every pause point the NaN was seen at: 'nan x59' for 30 steps)."""
    import torch
    from torch import nn

    s = session_factory("nan")
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(30):
        opt.zero_grad()
        (model(torch.randn(4, 2)).sum() * float("nan")).backward()
        opt.step()
    assert len(s.breaks) == 1
    assert s.breaker.break_set.repeats == {"nan": 29}


def test_a_spec_is_parsed_once_per_process():
    """The CLI's check, AgentConfig, the breakpoints and the TUI's check as you type all
    parse a spec: the grammar runs once for it (a Condition is frozen, so it is shared)."""
    from stepdbg.wire import conditions
    from stepdbg.wire.agent_config import AgentConfig

    spec = "expr:loss > 4 and step > 123457"
    before = conditions._parsed.cache_info().misses
    config = AgentConfig.from_json(AgentConfig(breaks=[spec]).to_json())
    assert conditions.parse(config.breaks[0]) is conditions.parse(spec)
    assert conditions._parsed.cache_info().misses == before + 1
    with pytest.raises(conditions.ConditionError):  # an error is said each time, never kept
        conditions.parse(["nan"])  # type: ignore[arg-type]
