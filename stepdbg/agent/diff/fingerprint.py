"""A tensor's fingerprint for `stepdbg diff`: a few hundred bytes that stand for it.

``fingerprint(t)`` reads a tensor and returns a JSON-able dict: its shape, dtype, a hash
of its bytes (the bitwise comparison), how many of its values are not finite, four
statistics of the finite ones (mean, mean of |x|, root mean square, max |x|) and
SAMPLES values at evenly spaced positions (what ``--atol/--rtol`` compare). It only
reads: no gradient is recorded, no random number drawn, the tensor is not changed (a
device tensor is copied to the host, which waits for the device).

``tensors_in(obj)`` finds the tensors of a module's arguments or output (tuples, lists,
dicts, HF ModelOutputs), at most MAX_TENSORS of them, in order.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch

SAMPLES = 16  # values at evenly spaced positions of the flattened tensor
MAX_TENSORS = 8  # tensors fingerprinted per argument list or output
_MAX_DEPTH = 4


def fingerprint(t: Any) -> dict[str, Any]:
    """The fingerprint of `t` (a tensor; anything else is {"none": True} or its type)."""
    if t is None:
        return {"none": True}
    if not isinstance(t, torch.Tensor):
        return {"value": _plain(t)}
    head: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
    if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        return {**head, "unreadable": str(t.layout if t.layout != torch.strided else t.device.type)}
    with torch.no_grad():
        x = t.detach()
        if x.device.type != "cpu":
            x = x.to("cpu")
        if x.is_complex():
            x = torch.view_as_real(x)
        flat = x.contiguous().reshape(-1)
        digest = hashlib.blake2b(flat.view(torch.uint8).numpy(), digest_size=8).hexdigest() \
            if flat.numel() else "empty"
        n = flat.numel()
        k = min(n, SAMPLES)
        # Evenly spaced positions in whole numbers (a float linspace rounds past the end above 2**24).
        picks = torch.arange(k, dtype=torch.long) * (n - 1) // max(k - 1, 1)
        samples = flat[picks].to(torch.float64).tolist()
        nonfinite, stats = _stats(flat) if flat.is_floating_point() else (0, _stats(flat.to(torch.float64))[1])
    return {**head, "hash": digest, "nonfinite": nonfinite, "stats": stats, "samples": samples}


def _stats(flat: torch.Tensor, wide: bool = False) -> tuple[int, list[float]]:
    """(count of non-finite values, [mean, mean |x|, rms, max |x|] of the finite ones), summed
    in float32 (float64 for a float64 tensor): a cast to float64 costs 25x a float32 norm.
    A finite sum says every value is finite, without an element-wise check; finite values
    whose sum overflows float32 (near 3e38) are summed again in float64 (`wide`)."""
    n = flat.numel()
    acc = torch.float64 if wide or flat.dtype == torch.float64 else torch.float32
    total = flat.sum(dtype=acc)
    if bool(torch.isfinite(total)):
        good, good_n = flat, n
    else:
        finite = torch.isfinite(flat)
        good_n = int(finite.sum())
        good = flat[finite]
        total = good.sum(dtype=acc)
        if good_n and not bool(torch.isfinite(total)) and not wide:
            return _stats(flat, wide=True)
    if not good_n:
        return n, [0.0, 0.0, 0.0, 0.0]
    stats = [float(total) / good_n, float(torch.linalg.vector_norm(good, 1, dtype=acc)) / good_n,
             float(torch.linalg.vector_norm(good, 2, dtype=acc)) / good_n ** 0.5,
             float(torch.linalg.vector_norm(good, float("inf"), dtype=acc))]
    if not wide and not all(math.isfinite(v) for v in stats):
        return _stats(flat, wide=True)
    return n - good_n, stats


def tensors_in(obj: Any, depth: int = 0, out: list[Any] | None = None) -> list[Any]:
    """The tensors in `obj`, depth first, at most MAX_TENSORS."""
    found: list[Any] = [] if out is None else out
    if len(found) >= MAX_TENSORS or depth > _MAX_DEPTH:
        return found
    if isinstance(obj, torch.Tensor):
        found.append(obj)
    elif isinstance(obj, dict):
        for v in list(obj.values()):
            tensors_in(v, depth + 1, found)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            tensors_in(v, depth + 1, found)
    return found


def _plain(v: Any) -> Any:
    """A non-tensor value as JSON takes it (a Python number stays a number)."""
    if isinstance(v, (bool, int, float, str)):
        return v
    return type(v).__name__
