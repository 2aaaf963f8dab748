"""What arming (a front end attached: model.armed) adds to each step stays small and unseen:
own_id still renumbers a hook in every dict torch keeps it in, in its place, and gives the
number back; the output gradient's hook is the step's one Python call in the backward; the
Python calls arming adds to a step are counted (deterministic: sys.setprofile), not timed."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from stepdbg.agent.step.hooks import own_id


def test_own_id_renumbers_a_hook_in_every_dict_torch_keeps_it_in():
    m = nn.Linear(2, 2)
    users = m.register_forward_hook(lambda *a: None)
    ours = own_id(m.register_forward_hook(lambda *a, **k: None, with_kwargs=True, always_call=True))
    assert ours.id < 0 and list(m._forward_hooks) == [users.id, ours.id]
    assert list(m._forward_hooks_with_kwargs) == [ours.id] and list(m._forward_hooks_always_called) == [ours.id]
    nxt = RemovableHandle.next_id
    assert m.register_forward_hook(lambda *a: None).id == nxt  # (stepdbg's took no number)
    assert own_id(ours) is ours and ours.id < 0  # (renumbered once)
    ours.remove()
    assert ours.id not in m._forward_hooks and not m._forward_hooks_with_kwargs and not m._forward_hooks_always_called


def _toy() -> tuple[nn.Module, object]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randn(32, 1)

    def step() -> torch.Tensor:
        opt.zero_grad()
        out = model(x)
        nn.functional.mse_loss(out, y).backward()
        opt.step()
        return out

    return model, step


def test_an_armed_step_keeps_the_output_gradient_and_leaves_no_hook_behind(session_factory):
    s = session_factory(actions=("replay",))
    s.model.armed = True
    _, step = _toy()
    seen, handles = [], []
    for _ in range(3):
        step()
        seen.append(s.model.capture["grad_output"])
        handles.append(s.model.capture["grad_hook"][1])
    assert all(g is not None and g.shape == (32, 1) for g in seen)
    assert seen[0] is not seen[1] and not torch.equal(seen[0], seen[2])  # (each step's own: the weights moved)
    assert all(len(h) == 1 and h[0].id < 0 for h in handles)  # one hook a step, in stepdbg's own ids
    # a step before the last's hook is gone from its node's dict; the last one's waits for the next forward
    assert all(h[0].id not in (h[0].hooks_dict_ref() or {}) for h in handles[:2])
    assert handles[2][0].id in handles[2][0].hooks_dict_ref()


def test_arming_adds_few_python_calls_to_a_step():
    """The toy step of benchmarks/armed_cost.py: arming added 15 Python calls a step (a
    generator for one output, _watch, own_id, the hook's _keep and _mine in the backward,
    the backward watch's before_backward in a step of one backward); 10 now."""
    from benchmarks import armed_cost

    r = armed_cost.run(rounds=2, steps=5)
    added = r["armed"]["py_calls"] - r["unarmed"]["py_calls"]
    # (+ a fraction: the host memory is sampled by time, every 10 ms, three calls a sample, so
    # a slower run on a busy machine counts more: 10.15 in a loaded full run)
    assert 0 < added < 11, r
    assert r["ratio_p10"] > 0 and r["ratio_p25"] > 0
