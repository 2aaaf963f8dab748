"""What the doctor's rules measure: module counts, per-layer gradient norms, a
determinism check (the same step twice), and the verdict on an overfit run. Plain
functions over torch objects."""

from __future__ import annotations

import math
from typing import Any

import torch

from stepdbg.agent.step.step_model import StepModel

# ---------------------------------------------------------------------- measurements used by rules


def has_kind(root: torch.nn.Module, kinds: tuple[type, ...]) -> bool:
    return any(isinstance(m, kinds) for m in root.modules())


def count_kind(root: torch.nn.Module, kinds: tuple[type, ...]) -> int:
    return sum(isinstance(m, kinds) for m in root.modules())


def broadcasts(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        return False
    return True


def name_span(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"


def layer_norms(m: StepModel, params: list[torch.nn.Parameter], grads: bool) -> dict[str, float]:
    """Gradient norm per module that owns weights, in one fused pass."""
    by_param = {id(p): p for p in params if p.grad is not None}
    out: dict[str, float] = {}
    for root in list(m.roots.values()):
        mods = [(n, m) for n, m in root.named_modules()
                if any(id(p) in by_param for p in m.parameters(recurse=False))]
        tensors = [[p.grad for p in m.parameters(recurse=False) if id(p) in by_param] for _, m in mods]
        flat = [t for ts in tensors for t in ts]
        if not flat:
            continue
        with torch.no_grad():
            norms = torch.stack([n.float().cpu() for n in torch._foreach_norm(flat, 2.0)]).tolist()
        i = 0
        for (name, _), ts in zip(mods, tensors, strict=True):
            out[name or "(root)"] = math.sqrt(sum(v * v for v in norms[i:i + len(ts)]))
            i += len(ts)
    return out


# ---------------------------------------------------------------------- determinism (row 11)


def determinism_check(m: StepModel) -> dict[str, Any]:
    """Replay the captured step twice from the same state; compare outputs and gradients.
    Python's and numpy's RNGs, and generators the model holds, are as they were after."""
    from stepdbg.agent.diff.randomness import Others
    from stepdbg.agent.replay.replay import eager_root

    root = eager_root(m)
    others = Others(root) if root is not None else None
    try:
        return _determinism_check(m)
    finally:
        if others is not None:
            others.rewind()  # (the replays drew from them: the job draws what it would have drawn)


def _determinism_check(m: StepModel) -> dict[str, Any]:
    import random

    from stepdbg.agent.replay.replay import replay_twice

    a, b = replay_twice(m)
    if a is None or b is None:
        return {"checked": False, "reason": "nothing captured to replay yet"}
    diff_out, diff_grad = _max_diff(a["output"], b["output"]), _max_diff(a["grads"], b["grads"])
    result: dict[str, Any] = {
        "checked": True, "max_output_diff": diff_out, "max_grad_diff": diff_grad,
        "reproducible": diff_out == 0 and diff_grad == 0,
        "torch_initial_seed": torch.initial_seed(),
        "torch_seed_looks_set": torch.initial_seed() < 2**32,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
    }
    if not result["reproducible"]:
        # Same again with Python's and numpy's RNG put back too: if that makes it
        # reproducible, the step draws from an RNG that torch's state does not cover.
        py = random.getstate()
        np_state = _numpy_state()
        a2, b2 = replay_twice(m, before_each=lambda: (random.setstate(py), _numpy_restore(np_state)))
        other_rng = a2 is not None and _max_diff(a2["output"], b2["output"]) == 0 and \
            _max_diff(a2["grads"], b2["grads"]) == 0
        result["cause"] = ("the step draws from Python's or numpy's RNG, which torch's RNG state does not cover"
                           if other_rng else "nondeterministic kernels (or another source of randomness)")
    return result


def _numpy_state() -> Any:
    try:
        import numpy as np
    except ImportError:
        return None
    return np.random.get_state()


def _numpy_restore(state: Any) -> None:
    if state is not None:
        import numpy as np

        np.random.set_state(state)


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    worst = 0.0
    for x, y in zip(a, b, strict=False):
        if x is None or y is None or x.shape != y.shape:
            continue
        d = (x.double() - y.double()).abs()
        d = d[torch.isfinite(d)]
        if d.numel():
            worst = max(worst, float(d.max()))
    return worst


# ---------------------------------------------------------------------- overfit one batch (row 13)


FALLING = 3.0  # a loss this many times lower than at the start is still being fit


def overfit_verdict(losses: list[float]) -> tuple[bool, str]:
    """Whether a run on one repeated batch reached near zero, in words."""
    finite = [v for v in losses if math.isfinite(v)]
    if len(finite) < 2:
        return False, "the loss was not finite"
    first, best, last = finite[0], min(finite), finite[-1]
    ok = last <= max(0.05 * first, 1e-3) or best <= 1e-3
    if ok:
        verdict = "it can fit a batch"
    elif last <= first / FALLING:  # not there yet, but on its way: too few steps to say it cannot
        verdict = (f"not fit yet, though the loss is still falling ({first / last:.1f}x lower): run more steps "
                   f"(--steps {2 * len(losses)}) before concluding it cannot")
    else:
        verdict = "it cannot fit even one batch"
    return ok, (f"the loss went from {first:.4g} to {last:.4g} (best {best:.4g}) in {len(losses)} steps on one "
                f"batch: {verdict}")

