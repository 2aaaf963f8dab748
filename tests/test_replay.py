"""Replay: the producer of the first non-finite value, wherever it is born; state untouched."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn


def line_of(fn, marker: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(src) if marker in line)


class SqrtNorm(nn.Module):
    """Finite forward, infinite gradient: d/dx sqrt(x) at 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x * x) + 1.0  # @sqrt


class WithDropoutAndBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.norm = SqrtNorm()
        self.out = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.drop(self.bn(self.fc(x)))))


def snapshot(model: nn.Module, opt: torch.optim.Optimizer) -> dict:
    return {
        "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        "grads": {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
        "buffers": {n: b.clone() for n, b in model.named_buffers()},
        "rng": torch.get_rng_state(),
        "opt": {k: v.clone() if isinstance(v, torch.Tensor) else v
                for st in opt.state.values() for k, v in st.items()},
        "modes": [m.training for m in model.modules()],
    }


def same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=0, atol=0, equal_nan=True)


def assert_same(a: dict, b: dict) -> None:
    for key in ("params", "buffers", "grads"):
        for n in a[key]:
            assert same(a[key][n], b[key][n]), f"{key} {n} changed"
    assert torch.equal(a["rng"], b["rng"])
    assert a["modes"] == b["modes"]
    assert a["opt"].keys() == b["opt"].keys()


def test_nan_born_in_backward_is_found_and_nothing_changes(session_factory):
    """sqrt(x*x) at x=0 is finite forward, inf backward; the replay names SqrtBackward0, the
    module and the line, and leaves params, grads, buffers, RNG, modes and optimizer as they were."""
    s = session_factory("nan", actions=())
    s.model.armed = True
    torch.manual_seed(0)
    model = WithDropoutAndBN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with torch.no_grad():
        model.fc.weight[0].zero_()
        model.fc.bias[0] = 0.0  # feature 0 is exactly 0 -> BN keeps it 0 -> sqrt(0)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    assert s.breaks == [] and s.step == 0  # the gradient check runs at the optimizer step
    seen: dict = {}

    def at_step_hook(opt_, args, kwargs):
        if s.breaks and "replay" not in seen:
            seen["before"] = snapshot(model, opt)
            seen["replay"] = s.views.replay()
            seen["after"] = snapshot(model, opt)

    h = torch.optim.Optimizer.register_step_pre_hook(opt, at_step_hook)
    opt.step()
    h.remove()
    (brk,) = s.breaks
    assert brk.phase == "before_optimizer_step" and "fc.weight.grad" in brk.reason
    first = seen["replay"]["first_nonfinite"]
    assert first["where"] == "backward"
    assert (first["op"], first["node"]) == ("sqrt", "SqrtBackward0"), first  # as the program calls it; its backward
    assert first["module"] == "norm" and first["module_type"] == "SqrtNorm"
    assert first["line"] == line_of(SqrtNorm.forward, "# @sqrt")
    assert_same(seen["before"], seen["after"])


@pytest.mark.parametrize("device", ["cpu", "as-on-a-gpu"])
def test_nan_born_in_the_loss_is_named_from_the_loss_graph(session_factory, device):
    """Model output finite, loss not: log of a probability that is exactly 0."""
    s = session_factory("nan", actions=("replay",))
    s.model.defer_reads = device != "cpu"
    model = nn.Sequential(nn.Linear(4, 3))
    x = torch.randn(8, 4)
    probs = torch.softmax(model(x), dim=1) * torch.tensor([1.0, 1.0, 0.0])
    loss = -torch.log(probs[:, 2]).mean()  # @loss-log
    loss.backward()
    (brk,) = s.breaks
    assert "born in the loss computation" in brk.reason
    (replay,) = s.views.replays
    first = replay["first_nonfinite"]
    assert first["where"] == "loss" and first["op"] == "log" and first["module"] is None
    assert first["line"] == line_of(test_nan_born_in_the_loss_is_named_from_the_loss_graph, "# @loss-log")


def test_a_loss_born_nan_read_after_its_backward_says_the_loss_graph_is_gone(session_factory):
    """The step's one read (--skip-on-device) comes after the backward, which freed the loss
    graph: the replay says so, and that the NaN was born in the loss, not "nothing found"."""
    s = session_factory("nan", actions=("replay",), skip_on_device=True)
    model = nn.Sequential(nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # (no found_inf: the read before the update)
    probs = torch.softmax(model(torch.randn(8, 4)), dim=1) * torch.tensor([1.0, 1.0, 0.0])
    (-torch.log(probs[:, 2]).mean()).backward()
    opt.step()
    (brk,) = s.breaks
    (replay,) = s.views.replays
    assert brk.phase == "before_optimizer_step" and replay["first_nonfinite"] is None
    assert "born in the loss" in replay["summary"] and "freed the loss graph" in replay["summary"], replay["summary"]


def test_replay_with_nothing_captured_says_so(session_factory):
    s = session_factory("nan")
    assert s.views.replay()["summary"].startswith("nothing to replay")


def test_activations_condition_breaks_in_the_producing_module(session_factory):
    s = session_factory("activations")
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with torch.no_grad():
        model[0].weight.fill_(1e38)
    model(torch.full((2, 4), 10.0)).sum().backward()
    (brk,) = s.breaks
    assert brk.details["module"] == "0" and brk.phase == "forward"


def test_the_activation_watch_hooks_no_module_and_tells_a_data_born_nan(session_factory):
    """Steady state: no hook on any module, the output checked once per forward. A NaN
    already in the batch is said to be born in the data, with no module named."""
    from torch.nn.modules import module as nn_module

    hooks = len(nn_module._global_forward_hooks)
    s = session_factory("activations")
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    for step in range(3):
        x = torch.randn(2, 4)
        if step == 2:
            assert len(nn_module._global_forward_hooks) == hooks  # the roots are known: no global hook left
            x[1, 2] = float("nan")
        model(x).sum().backward()
    (brk,) = s.breaks
    assert (brk.step, brk.details["module"]) == (2, None) and "born in the data" in brk.reason


@pytest.mark.parametrize("reads", ["cpu", "as-on-a-gpu", "one-read"])
def test_replay_in_a_dataloader_loop_with_accumulation(session_factory, reads):
    """Loop style (a) with two micro-batches: the replay re-runs the micro-batch that broke.
    On the CPU, and on a GPU with the replay armed, its loss is read before its backward,
    where the NaN breaks. With the step's one read (a GPU under --skip-on-device; SGD falls
    back to the read before the update) the losses are read before the update, after the
    last micro-batch: the NaN is put in the first one, and the break names it and the
    replay re-runs it, not the last one (whose loss is finite)."""
    from torch.utils.data import DataLoader, TensorDataset

    s = session_factory("nan", actions=("replay",), skip_on_device=reads == "one-read")
    s.model.defer_reads = reads != "cpu"
    x = torch.rand(32, 4) + 0.1
    if reads == "one-read":
        x[17, 1] = 0.0  # batch 4 (step 2, first micro-batch)
    else:
        x[21, 1] = 0.0  # batch 5 (step 2, second micro-batch)
    loader = DataLoader(TensorDataset(x, torch.randn(32, 1)), batch_size=4)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    model.register_forward_pre_hook(lambda m, a: (torch.log(a[0]),))  # the producer: a hook on the root
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for i, (xb, yb) in enumerate(loader):
        nn.functional.mse_loss(model(xb), yb).backward()
        if i % 2 == 1:
            opt.step()
            opt.zero_grad()
    brk, first = s.breaks[0], s.views.replays[0]["first_nonfinite"]
    if reads != "one-read":
        assert (brk.step, brk.phase) == (2, "before_backward")
    else:
        assert (brk.step, brk.phase, brk.details["forward"]) == (2, "before_optimizer_step", "1 of 2"), brk
        assert brk.reason.startswith("loss is ") and " in micro-batch 1 of 2; " in brk.reason, brk.reason
    assert first["op"] == "log" and first["where"] == "forward"
    assert first["line"] == line_of(test_replay_in_a_dataloader_loop_with_accumulation, "torch.log(a[0])")


class Sequence(nn.Module):
    """pytorch/examples time_sequence_prediction's model: two LSTMCells and a Linear, in double."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm1, self.lstm2, self.linear = nn.LSTMCell(1, 51), nn.LSTMCell(51, 51), nn.Linear(51, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = c = torch.zeros(x.size(0), 51, dtype=torch.double)
        h2 = c2 = torch.zeros(x.size(0), 51, dtype=torch.double)
        outputs = []
        for t in x.split(1, dim=1):
            h, c = self.lstm1(t, (h, c))
            h2, c2 = self.lstm2(h, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("device", ["cpu", "as-on-a-gpu"])
def test_a_loss_born_inf_names_the_loss_function_and_the_users_line(session_factory, device):
    """time_sequence_prediction with a target of 1e200 (finite in double): the squared error
    overflows in the loss. The replay names mse_loss and the line that called it through
    the `criterion` variable, not a backward node at an unknown line. On a GPU too: armed
    for a replay, the loss is read before the backward frees its graph (it was read before
    the update, and the replay had no graph left to search)."""
    s = session_factory("nan", actions=("replay",))
    s.model.defer_reads = device != "cpu"
    torch.manual_seed(0)
    seq = Sequence().double()
    criterion = nn.MSELoss()
    opt = torch.optim.SGD(seq.parameters(), lr=0.1)
    x = torch.randn(3, 10, dtype=torch.double)
    target = torch.full((3, 10), 1e200, dtype=torch.double)
    opt.zero_grad()
    out = seq(x)
    loss = criterion(out, target)  # @criterion
    loss.backward()
    (replay,) = s.views.replays
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["loss_fn"]) == ("loss", "mse_loss", "mse_loss"), first
    assert first["line"] == line_of(test_a_loss_born_inf_names_the_loss_function_and_the_users_line, "# @criterion")
    assert replay["summary"].startswith("mse_loss (MseLossBackward0) in the loss computation produced"), replay


def test_provenance_never_reads_a_tensor_whose_storage_was_freed_under_it():
    """FSDP2 resizes its all-gather buffers' storage to 0 between uses; reading one in the
    replay's TorchFunctionMode crashed the process (SIGSEGV)."""
    from stepdbg.agent.measure.tensors import readable
    from stepdbg.agent.replay.provenance import flags_of

    t = torch.full((4, 4), float("nan"))
    assert readable(t) and flags_of(t) == 1 and readable(t[1:, 2:]) and readable(torch.empty(0))
    t.untyped_storage().resize_(0)
    assert not readable(t) and flags_of(t) == 0
    assert not readable(torch.empty(3, device="meta"))


@pytest.mark.parametrize("after", ["/ accum", "* (1 / accum)", ".mean() / accum", "/ torch.tensor(4.0)", "+ 0.0"])
def test_an_overflowing_loss_then_scaled_names_the_loss_function_not_the_scaling(session_factory, after):
    """nanoGPT divides the loss by its accumulation steps, Lightning's closure by
    `normalize`: the replay named `div ... at an unknown line` and advised an eps. The op
    that overflowed is mse_loss, at the user's line, whatever scales it after."""
    s = session_factory("nan", actions=("replay",))
    model = nn.Linear(4, 1)
    accum = 4
    with torch.no_grad():
        model.weight.fill_(1e20)  # a finite output of 1e20: its square overflows in float32
    x, y = torch.ones(8, 4), torch.zeros(8, 1)
    loss = eval(f"nn.functional.mse_loss(model(x), y) {after}", {"nn": nn, "torch": torch},  # @mse
                {"model": model, "x": x, "y": y, "accum": accum})
    loss.backward()
    (replay,) = s.views.replays
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["loss_fn"]) == ("loss", "mse_loss", "mse_loss"), first
    assert replay["summary"].startswith("mse_loss (MseLossBackward0) in the loss computation produced"), replay
    assert first["line"] == line_of(test_an_overflowing_loss_then_scaled_names_the_loss_function_not_the_scaling,
                                    "# @mse"), first


class WritesNaN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.head = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        h[0, 7] = float("nan")  # @setitem
        return self.head(torch.relu(h))


def test_an_in_place_write_of_a_nan_is_the_producer_at_its_line(session_factory):
    """`h[0, 7] = nan` was blamed on the relu of the next line, whose input was already NaN:
    the write made no output for the replay to look at."""
    s = session_factory("nan", actions=("replay",))
    model = WritesNaN()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    first = s.views.replays[0]["first_nonfinite"]
    assert (first["where"], first["op"], first["module_type"]) == ("forward", "__setitem__", "WritesNaN"), first
    assert first["line"] == line_of(WritesNaN.forward, "# @setitem"), first
    advice = s.views.replays[0]["advice"]  # (a written NaN: it said "overflowed ... from finite inputs")
    assert advice["cause"] == "constant" and "overflow" not in advice["text"], advice


@pytest.mark.parametrize("nan", ['float("nan")', "torch.nan", "math.inf - math.inf"])
def test_a_nan_written_between_the_model_and_the_loss_is_that_op_at_its_line(session_factory, nan):
    """`out = out * float("nan")` after the model (how a NaN is planted, in a training_step
    or a loop): it was named mse_loss, an overflow 'from finite inputs', then the data. The
    number, saved by autograd as a 0-d tensor, summed from garbage (torch 2.13)."""
    import math

    s = session_factory("nan", actions=("replay",))
    model = nn.Linear(4, 1)
    out = model(torch.randn(8, 4))
    out = out * eval(nan, {"torch": torch, "math": math})  # @planted
    nn.functional.mse_loss(out, torch.zeros(8, 1)).backward()
    (replay,) = s.views.replays
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["constant"]) == ("loss", "mul", "nan"), first
    assert first["line"] == line_of(test_a_nan_written_between_the_model_and_the_loss_is_that_op_at_its_line,
                                    "# @planted"), first
    assert replay["advice"]["cause"] == "constant" and replay["reproduced"] is True, replay


@pytest.mark.parametrize("op", ["log", "log1p", "pow", "div", "acos"])
def test_an_op_that_keeps_only_its_input_is_named_when_it_made_the_nan_in_the_loss(session_factory, op):
    """`mse + log(out.mean() - 5)`: log keeps its input, not its result, so nothing saved
    showed the NaN, and the replay named the `add` above it, 'overflowed the float range
    from finite inputs', at an unknown line. Its result is made again from its input."""
    s = session_factory("nan", actions=("replay",))
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    out = model(torch.randn(8, 4))
    m = out.mean()
    if op == "log":
        penalty = torch.log(m - 5)  # @log
    elif op == "log1p":
        penalty = torch.log1p(m - 5)  # @log1p
    elif op == "pow":
        penalty = torch.pow(m - 5, 0.5)  # @pow
    elif op == "div":
        penalty = torch.div(m, m - m)  # @div
    else:
        penalty = torch.acos(m + 5)  # @acos
    loss = nn.functional.mse_loss(out, torch.zeros(8, 1)) + penalty
    loss.backward()
    (replay,) = s.views.replays
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"]) == ("loss", op), first
    assert first["line"] == line_of(test_an_op_that_keeps_only_its_input_is_named_when_it_made_the_nan_in_the_loss,
                                    f"# @{op}"), first
    assert "overflow" not in replay["advice"]["text"], replay["advice"]
