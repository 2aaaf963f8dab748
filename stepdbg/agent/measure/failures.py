"""What an exception or a bad output tells: the module it happened in (by its name in the
model), the tensors of the failing frame (a shape error needs their shapes), and one plain
line about the common PyTorch errors. Read by a post-mortem break and the activation watch."""

from __future__ import annotations

from collections.abc import Iterable
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure.frames import exception_text


def module_name(roots: Iterable[torch.nn.Module], module: torch.nn.Module) -> str:
    for root in list(roots):
        for name, m in root.named_modules():
            if m is module:
                return name or type(root).__name__
    return type(module).__name__


def tensor_locals(frame: FrameType) -> dict[str, Any]:
    """Shape/dtype of each tensor local of a frame (what a shape error needs)."""
    out = {}
    for k, v in list(frame.f_locals.items()):
        if isinstance(v, torch.Tensor):
            out[k] = {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device)}
    return out


def failing_module(roots: Iterable[torch.nn.Module], frames: list[FrameType]) -> dict[str, Any] | None:
    """The innermost module whose forward is on the failing stack, with its tensors' shapes."""
    for frame in reversed(frames):
        m = frame.f_locals.get("self")
        if isinstance(m, torch.nn.Module):
            return {
                "name": module_name(roots, m),
                "type": type(m).__name__,
                "tensors": tensor_locals(frame),
                "params": {n: list(p.shape) for n, p in m.named_parameters(recurse=False)},
            }
    return None


_ERROR_HINTS = [
    ("modified by an inplace operation",
     "a tensor that autograd saved for the backward was changed in place afterwards; the replay names the forward op that saved it"),
    ("leaf variable",
     "an in-place operation on a parameter (a leaf that requires grad) is recorded by autograd; do it under torch.no_grad() or out of place"),
    ("backward through the graph a second time",
     "backward ran twice over the same graph, whose saved tensors the first backward freed; detach values kept across steps or compute the loss anew"),
    ("does not require grad and does not have a grad_fn",
     "backward was called on a tensor outside autograd (made under no_grad, detached, or from .item())"),
    ("shapes cannot be multiplied",
     "a matrix multiply got inputs whose inner dimensions differ; compare the shapes of the tensor locals below"),
    ("size of tensor a", "two tensors' shapes do not broadcast; compare the shapes of the tensor locals below"),
    ("out of memory", "the allocator could not satisfy a request: the batch is too large or tensors are kept alive across steps"),
    ("expected scalar type", "two tensors of different dtypes met in one op"),
    ("Expected all tensors to be on the same device", "tensors on different devices met in one op"),
]


def explain_error(exc: BaseException) -> str | None:
    """One plain line about a common PyTorch error, or None."""
    text = exception_text(exc)
    for needle, hint in _ERROR_HINTS:
        if needle.lower() in text.lower():
            return hint
    return None
