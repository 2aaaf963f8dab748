"""Whether the update before this step can have made a parameter non-finite, or something
wrote it between the steps. An optimizer's update of finite gradients, from a finite
optimizer state, at a finite learning rate, moves each weight by at most about lr x the
gradient norm (Adam's by about lr): while that is far below the float range's edge, it
makes no NaN of a finite weight, and no inf of a weight far below the edge. (Larger, it
overflows: an inf, and an inf times a weight of 0 in weight decay, a NaN.) So a parameter
non-finite where all that holds was written between the steps: by the program (a write
under torch.no_grad, load_state_dict, a hook) or by the device (a flipped bit). Said
instead of "an earlier update made it so", which sent people to lower a learning rate that
was never the cause. Read at a break only (the parameter's values and its optimizer state,
once).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

EDGE = 1e30  # far below float32's 3.4e38: an update or a weight this large is not "far from the edge"
UPDATE_BOUND = 1e4  # an update moves a weight by at most this many times lr x max(1, grad norm) (Adam's ~lr x 3)


def written_between(params: Iterable[torch.Tensor], history: Iterable[dict[str, Any]],
                    optimizers: Iterable[Any], step: Any = None) -> str | None:
    """Words for the break and the replay when the previous update cannot have made the
    non-finite values of `params` (those that hold them), or at step 0 there was none;
    None when it may have, or when the previous step's gradient norm or learning rate is
    not known."""
    rows = list(history)
    prev = rows[-1] if rows else None
    if prev is None:
        return "they were so before the first step: the model was built or loaded so" if step == 0 else None
    norm, lrs = prev.get("grad_norm"), prev.get("lr")
    lr = max((x for x in lrs if isinstance(x, float)), default=None) if isinstance(lrs, list) else None
    if not isinstance(norm, float) or not math.isfinite(norm) or lr is None or not math.isfinite(lr):
        return None
    kinds = set()
    with torch.no_grad():
        for p in params:
            kind = _kind(p.detach(), lr * max(1.0, norm) * UPDATE_BOUND)
            if kind == "finite":
                continue
            if kind is None or not _state_finite(p, optimizers):
                return None
            kinds.add(kind)
    if not kinds:
        return None
    how = ("an update of finite values makes no NaN" if kinds == {"nan"} else
           "the weights were far from the float range's edge")
    return (f"not by the update of step {prev.get('step', '?')}: its gradients were finite (norm {norm:.3g}, LR "
            f"{lr:.3g}) and {how}; written between the steps: a write under torch.no_grad, load_state_dict, a "
            "hook, or the device")


def annotate(first: dict[str, Any] | None, params: Iterable[torch.Tensor], model: Any, step: Any) -> None:
    """A replay's origin in a parameter gets `written`: the words above, when they hold."""
    if first is not None and first.get("where") == "parameter":
        first["written"] = written_between(params, model.history, list(getattr(model, "optimizers", [])), step)


def _kind(t: torch.Tensor, update: float) -> str | None:
    """'nan' (holds a NaN: no update of finite values makes one), 'inf' (only infs, beside
    values far from the edge, which an update of at most `update` cannot have reached),
    'finite', or None (an update may have made it)."""
    if not t.is_floating_point() or t.numel() == 0:
        return "finite"
    if update >= EDGE:  # (an update that large overflows: inf, and inf times a weight of 0, NaN)
        return None if not bool(torch.isfinite(t).all()) else "finite"
    if bool(torch.isnan(t).any()):
        return "nan"
    finite = t[torch.isfinite(t)]
    if finite.numel() == t.numel():
        return "finite"
    largest = float(finite.abs().max()) if finite.numel() else 0.0
    return "inf" if largest < EDGE else None


def _state_finite(p: torch.Tensor, optimizers: Iterable[Any]) -> bool:
    """The optimizer state of `p` (Adam's moments, SGD's momentum) is finite where it is known."""
    for opt in optimizers:
        held = getattr(getattr(opt, "state", None), "get", lambda _: None)(p)  # (a bundle's: no optimizer)
        for v in (held or {}).values():
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all()):
                return False
    return True
