"""stepdbg's torch hooks take ids of their own (step/hooks.py own_id), so that a user's hook
registered after one of stepdbg's gets the id it gets in a plain run (the ids are pickled
with a module's hooks), and every hook keeps its place in the order torch runs them."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from stepdbg.agent.step.hooks import own_id


def test_own_ids_keep_the_order_and_give_the_users_ids_back():
    m = nn.Linear(2, 2)
    users = m.register_forward_hook(lambda *a: None)
    ours = own_id(m.register_forward_hook(lambda *a: None))
    first = own_id(m.register_forward_hook(lambda *a: None, prepend=True))
    assert list(m._forward_hooks) == [first.id, users.id, ours.id] and ours.id < 0 and first.id < 0
    nxt = RemovableHandle.next_id
    assert m.register_forward_hook(lambda *a: None).id == nxt  # (stepdbg's took no number)
    out = torch.ones(2, requires_grad=True) * 2
    grad_hook = own_id(out.grad_fn.register_prehook(lambda g: None))
    assert grad_hook.id < 0 and RemovableHandle.next_id == nxt + 1
    for h in (ours, first, grad_hook):
        h.remove()
    assert list(m._forward_hooks)[0] == users.id
