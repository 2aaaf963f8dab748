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
        f = flat.to(torch.float64)
        n = f.numel()
        finite = torch.isfinite(f)
        good = f[finite]
        nonfinite = n - good.numel()
        if good.numel():
            a = good.abs()
            stats = [float(good.mean()), float(a.mean()), float(good.square().mean().sqrt()), float(a.max())]
        else:
            stats = [0.0, 0.0, 0.0, 0.0]
        picks = torch.linspace(0, n - 1, min(n, SAMPLES)).round().long() if n else torch.zeros(0, dtype=torch.long)
        samples = f[picks].tolist()
    return {**head, "hash": digest, "nonfinite": nonfinite, "stats": stats, "samples": samples}


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
