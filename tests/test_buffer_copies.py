"""What an armed replay copies of a model's buffers at each forward (step/buffer_copies.py):
the buffers named_buffers names, each tensor once, read by key at every forward (a buffer
replaced is the new one), with the walk of the module tree kept between REWALK steps and
the model never kept alive by it."""

from __future__ import annotations

import gc
import weakref

import torch
from torch import nn

from stepdbg.agent.step.buffer_copies import REWALK, BufferCopies


def model() -> nn.Module:
    bn = nn.BatchNorm1d(4)
    m = nn.Sequential(nn.Linear(4, 4), bn, nn.Sequential(nn.BatchNorm1d(4), nn.ReLU()))
    m.register_buffer("shared", bn.running_mean)  # the same tensor under two names: copied once
    m.register_buffer("empty", None)
    return m


def test_the_copies_are_named_buffers_and_not_the_same_tensors():
    m, copies = model(), BufferCopies()
    got = copies.take(m, 0)
    want = dict(m.named_buffers())
    assert list(got) == list(want)
    for name, b in want.items():
        assert torch.equal(got[name], b) and got[name].data_ptr() != b.data_ptr()


def test_a_replaced_buffer_is_the_new_one_and_a_new_buffer_comes_with_the_next_walk():
    m, copies = model(), BufferCopies()
    copies.take(m, 0)
    m[1].running_var = torch.full((4,), 7.0)  # a program that assigns a buffer anew
    assert torch.equal(copies.take(m, 1)["1.running_var"], torch.full((4,), 7.0))
    m[0].register_buffer("late", torch.ones(2))
    assert "0.late" not in copies.take(m, 2)
    assert "0.late" in copies.take(m, REWALK)
    assert list(copies.take(m, REWALK + 1)) == list(dict(m.named_buffers()))


def test_another_model_at_the_same_id_is_walked_anew_and_none_is_kept_alive():
    m, copies = model(), BufferCopies()
    copies.take(m, 0)
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None
    other = nn.BatchNorm1d(3)
    assert list(copies.take(other, 1)) == ["running_mean", "running_var", "num_batches_tracked"]
