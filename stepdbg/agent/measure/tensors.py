"""Tensor summaries and the fused norms the always-on checks use."""

from __future__ import annotations

import itertools
import math
import reprlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch._utils import _flatten_dense_tensors

from stepdbg.agent.measure.memory import cuda_in_use

HIST_BINS = 20
# Values a summary reads exactly: a dense tensor up to 2**28 (a pass over it is a pass over
# memory), any other view (strided, broadcast: expand(10**9) has 4 bytes) up to 2**22; past
# that, an even sample of 2**22 values, and the answer says so.
EXACT_DENSE, SAMPLE = 1 << 28, 1 << 22


def summarize(t: Any, name: str = "", bins: int = HIST_BINS) -> dict[str, Any]:
    """Summary of a tensor (or a short description of anything else).

    Statistics are taken over finite values; nan/inf/zero counts say what was left out.
    """
    if not isinstance(t, torch.Tensor):
        return {"name": name, "type": type(t).__name__, "repr": short_repr(t)}
    out: dict[str, Any] = {
        "name": name,
        "type": "Tensor",
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
        "numel": t.numel(),
    }
    t, shard = local_shard(t)
    out.update(shard)
    if t.is_sparse or t.numel() == 0:
        return out
    if t.is_meta:
        out["note"] = "a meta tensor: shape, dtype and device only (it holds no values)"
        return out
    with torch.no_grad():
        x = t.detach()
        if x.is_quantized:
            x = x.dequantize()
        if x.numel() > (EXACT_DENSE if x.is_contiguous() else SAMPLE):
            x = first_values(x, SAMPLE, evenly=True)
            out["sampled"] = {"values": x.numel(), "of": t.numel(),
                              "method": "evenly spaced elements; counts and statistics are of the sample"}
        if x.is_complex():
            x = x.abs()
        x = x.float() if x.dtype != torch.float64 else x
        finite = torch.isfinite(x)
        n_nan = int(torch.isnan(x).sum())
        n_inf = int((~finite).sum()) - n_nan
        vals = x[finite]
        out.update(nan=n_nan, inf=n_inf, zeros=int((x == 0).sum()))
        if n_inf:  # (a one-value -inf was said 'inf or -inf': JSON carries no infinity, so its count)
            out["neg_inf"] = int((x == -math.inf).sum())
        if vals.numel():
            out.update(
                min=float(vals.min()),
                max=float(vals.max()),
                mean=float(vals.mean()),
                std=float(vals.std()) if vals.numel() > 1 else 0.0,
                norm=float(torch.linalg.vector_norm(vals)),
            )
            lo, hi = out["min"], out["max"]
            if hi == lo:
                hi = lo + 1.0
            counts = torch.histc(vals, bins=bins, min=lo, max=hi)
            out["hist"] = {"lo": lo, "hi": hi, "counts": [int(c) for c in counts]}
    return out


def is_dtensor(t: Any) -> bool:
    """A DTensor (FSDP2, tensor parallel), told by its type's name: no torch.distributed import."""
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def readable(t: torch.Tensor) -> bool:
    """Whether this rank can read `t`'s values in place: a dense tensor whose storage holds
    every element it views. Not a tensor subclass (a DTensor's values would need a
    collective), a meta tensor, nor one whose storage was freed under it (FSDP2 resizes its
    all-gather buffers' storage to 0 between uses: reading one crashed the process)."""
    if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.is_meta or t.layout != torch.strided:
        return False
    if t.numel() == 0:
        return True
    extent = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1
    return t.untyped_storage().nbytes() >= extent * t.element_size()


def local_shard(t: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    """A DTensor's shard on this rank (FSDP2's parameters, gradients and optimizer state),
    and what to say of it: statistics over the whole would take a collective, which a
    paused rank must never start alone. A plain tensor: itself, nothing to say."""
    if not is_dtensor(t):
        return t, {}
    local = t.to_local()
    return local, {"shard": {"shape": list(local.shape), "numel": local.numel(),
                             "placements": [repr(p) for p in t.placements], "stats_over": "this rank's shard"}}


def sharded_across_ranks(root: torch.nn.Module) -> str | None:
    """Why `root`'s forward cannot run on this rank alone, or None: its parameters are
    sharded (FSDP2's DTensors, FSDP's flat parameters) and its forward all-gathers them
    from every rank, which would wait forever for ranks that are not running it."""
    for m in root.modules():
        if type(m).__name__ == "FullyShardedDataParallel":
            return "its parameters are sharded by FSDP"
    if any(is_dtensor(p) for p in root.parameters()):
        return "its parameters are sharded DTensors (FSDP2)"
    return None


def slice_of(t: torch.Tensor, index: str, limit: int = 256) -> list[Any]:
    """The values at a numpy-style index string such as '0, :8'; at most `limit` numbers.
    A DTensor is indexed in this rank's shard (its summary says which): indexing the whole
    would gather it from ranks that are paused elsewhere."""
    key = tuple(_index_part(p) for p in index.split(",")) if index.strip() else ()
    try:
        part = local_shard(t)[0].detach()[key]
    except IndexError as e:  # (too many indices, one out of range: torch's words, first line)
        raise BadIndex(f"index {index!r} does not fit shape {list(t.shape)}: {str(e).splitlines()[0]}") from None
    if part.is_quantized:
        part = part.dequantize()
    part = first_values(part, limit).cpu()
    if part.is_complex():
        return [str(complex(v)) for v in part]
    return [float(v) if part.is_floating_point() else bool(v) if part.dtype == torch.bool else int(v) for v in part]


def first_values(t: torch.Tensor, limit: int, evenly: bool = False) -> torch.Tensor:
    """At most `limit` of `t`'s values as a flat tensor: the first ones in order, or with
    `evenly` ones spread over the whole. Reads only those: flattening a strided or broadcast
    view first would copy all of it (expand(10**9)[:4e8] took 27 s and 5 GB)."""
    n = t.numel()
    if n <= limit:
        return t.reshape(-1)
    flat = (torch.linspace(0, n - 1, limit, dtype=torch.float64, device=t.device).long() if evenly
            else torch.arange(limit, device=t.device))
    return t[torch.unravel_index(flat, t.shape)] if t.dim() else t.reshape(-1)[:limit]


class BadIndex(ValueError):
    """An index string a slice cannot take, in words (a Tensor panel's slice field, `p x[...]`)."""


def _index_part(p: str) -> int | slice:
    p = p.strip()
    try:
        if ":" in p:
            bits = [int(b) if b.strip() else None for b in p.split(":")]
            if len(bits) > 3:
                raise ValueError
            part: int | slice = slice(*bits)
        else:
            part = int(p)
    except ValueError:
        raise BadIndex(f"{p!r} is not an index: a whole number or a slice such as 0:8 or ::2, one per "
                       "dimension, with commas between") from None
    if isinstance(part, slice) and part.step is not None and part.step <= 0:  # (torch's ValueError, in words)
        raise BadIndex(f"{p!r}: a slice's step is a whole number above 0 (::2 takes every second value)")
    return part


def total_norm(grads: list[torch.Tensor]) -> torch.Tensor | None:
    """Global L2 norm of `grads`, left on the device (no host sync here), with no Python
    per tensor and a number of ops that does not grow with the tensors (a test counts them):

    - many small tensors on the CPU (a deep model's LayerNorms and biases): one copy into a
      flat buffer and one norm; on this 2-core machine 0.33 ms for 578 tensors where
      torch's own ``_foreach_norm`` pays an op per tensor (0.77 ms, and clip_grad_norm_'s
      stack of the norms 0.2 ms more);
    - otherwise (an accelerator, large tensors): one fused ``_foreach_norm`` (float32 norms
      for half precision, so a per-tensor norm over 65504 is not an fp16 inf) and one
      ``vector_norm`` of their stack, as clip_grad_norm_ reads it.

    Sparse or sharded (DTensor) gradients, several devices and float64 mixed with half
    precision take a pass per device."""
    if not grads:
        return None
    if not set(map(type, grads)) <= _PLAIN:  # (a C-level pass, no Python per tensor)
        return _norm_per_device(grads)
    wide = None if grads[0].dtype in _WIDE else torch.float32  # float64, complex: their own precision
    try:
        if len(grads) >= FLAT_MIN_TENSORS and grads[0].is_cpu \
                and sum(map(torch.Tensor.numel, grads)) <= FLAT_MAX_ELEMENTS:
            return torch.linalg.vector_norm(_flatten_dense_tensors(grads), dtype=wide)
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0, dtype=wide)))
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, several devices, mixed widths
        return _norm_per_device(grads)


FLAT_MIN_TENSORS = 32  # fewer: an op per tensor costs less than the copy
FLAT_MAX_ELEMENTS = 1 << 22  # the flat copy: at most 16 MB (float32) a step
_WIDE = (torch.float64, torch.complex64, torch.complex128)
_PLAIN = {torch.Tensor, torch.nn.Parameter}


def _norm_per_device(grads: list[torch.Tensor]) -> torch.Tensor:
    """total_norm's fallback: one pass per device (sparse tensors by their values)."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for t in grads:
        if t.is_sparse:
            t = t.coalesce()._values()
        by_device.setdefault(t.device, []).append(t)
    parts = []
    for device, ts in by_device.items():
        norms = torch._foreach_norm(ts, 2.0)
        parts.append(torch.linalg.vector_norm(torch.stack([n.float() for n in norms])).to(device))
    first = parts[0].device
    return torch.linalg.vector_norm(torch.stack([p.to(first) for p in parts]))


def nonfinite_names(named: Iterable[tuple[str, torch.Tensor]], limit: int = 10) -> list[str]:
    """Names of the tensors that hold a nan or inf (the slow, exact check for a bad path)."""
    bad = []
    with torch.no_grad():
        for name, t in named:
            if t is not None and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                bad.append(name)
                if len(bad) >= limit:
                    break
    return bad


def as_float(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        if x.numel() == 1:
            return float(x.item())  # one op: this runs every step for the loss
        return float(x.reshape(-1)[0].item()) if x.numel() else None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


class _Bounded(reprlib.Repr):
    """reprlib, bounded where it is not: bytes and bytearray are cut before they are
    copied, and dicts and sets are shown in their own order (reprlib sorts all of one
    first). A 100 MB bytes costs as little to show as a short one."""

    def repr_bytes(self, x: bytes | bytearray, level: int) -> str:
        m = self.maxstring
        return repr(x[:m]) + (f"... ({len(x):,} bytes)" if len(x) > m else "")

    repr_bytearray = repr_bytes

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items) + (", " + self.fillvalue if len(x) > self.maxdict else "") + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        if not x:
            return "set()"
        shown = [self.repr1(v, level - 1) for v in itertools.islice(x, self.maxset)] if level > 0 else []
        return "{" + ", ".join(shown) + (", " + self.fillvalue if len(x) > len(shown) else "") + "}"


def short_repr(x: Any, n: int = 200) -> str:
    """A repr of at most `n` characters whose cost does not grow with `x` (user objects'
    own __repr__ aside)."""
    bounded = _Bounded()
    bounded.maxstring = bounded.maxother = bounded.maxlong = n
    bounded.maxlist = bounded.maxtuple = bounded.maxdeque = bounded.maxarray = max(6, n // 20)
    bounded.maxset = bounded.maxfrozenset = bounded.maxdict = max(4, n // 40)
    try:
        r = bounded.repr(x)
    except Exception as e:  # a user object whose repr fails
        r = f"<repr failed: {type(e).__name__}: {_message(e)}>"
    if type(r) is not str:  # a str subclass's own __len__ and slicing could say any length
        r = "".join([r]) if issubclass(type(r), str) else "<repr failed: not a str>"
    return r if len(r) <= n else r[: n - 3] + "..."


def _message(e: Exception) -> str:
    """str(e), or why not (an exception's own __str__ can raise too)."""
    try:
        return str(e)
    except Exception:
        return "its message could not be read"


def first_tensor(x: Any) -> torch.Tensor | None:
    """The first tensor in a (nested) output: a tensor, a list/tuple or a dict of them."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for v in x:
            t = first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        for v in x.values():
            t = first_tensor(v)
            if t is not None:
                return t
    return None


def rng_state() -> dict[str, Any]:
    """torch's CPU RNG state, and CUDA's when CUDA is in use."""
    state: dict[str, Any] = {"cpu": torch.default_generator.get_state()}  # (torch.get_rng_state, one frame less)
    if cuda_in_use():  # every step: never true where CUDA is not there
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


HALF = (torch.float16, torch.bfloat16)


def all_finite(t: torch.Tensor) -> bool:
    """Whether every element is finite, in one reduction read once: a NaN or inf anywhere
    makes the sum non-finite, so a finite sum settles it; only a sum that overflowed from
    finite values needs the element-wise check. (The activation watch runs this on every
    training forward's output: two dispatches and a read, ~2 µs on the CPU.)"""
    if not t.is_floating_point() or t.numel() == 0:
        return not t.is_complex() or bool(torch.isfinite(t.detach()).all())
    d = t.detach()
    if d.dim() == 0:  # (also a Python number autograd saved: torch 2.13 sums one from garbage)
        return math.isfinite(d.item())
    total = d.sum(dtype=torch.float32) if d.dtype in HALF else d.sum()
    return math.isfinite(total.item()) or bool(torch.isfinite(d).all())


def output_at(x: Any, at: int | None) -> torch.Tensor | None:
    """Tensor number `at` of a model's output, as tensors_in walks it (the one whose gradient
    the capture kept: backward_capture.py); the first one when `at` is None."""
    if at is None:
        return first_tensor(x)
    return next((t for i, t in enumerate(tensors_in(x)) if i == at), None) if 0 <= at < MAX_OUTPUTS else None


def tensors_in(x: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Every tensor in args/kwargs/outputs (lists, tuples, dicts; not deeper than 4)."""
    if isinstance(x, torch.Tensor):
        yield x
    elif depth < 4 and isinstance(x, (list, tuple)):
        for v in x:
            yield from tensors_in(v, depth + 1)
    elif depth < 4 and isinstance(x, dict):
        for v in x.values():
            yield from tensors_in(v, depth + 1)


MAX_OUTPUTS = 8  # a model's output may be a tuple or dict of tensors: the first few are checked


def floating(x: Any, limit: int = MAX_OUTPUTS) -> Iterator[torch.Tensor]:
    """The floating-point tensors of a (nested) output, at most `limit` of them."""
    return itertools.islice((t for t in tensors_in(x) if t.is_floating_point()), limit)


def output_sum(output: Any) -> torch.Tensor | None:
    """The sum of the output's floating tensors, left on their device (float32 for half
    types): non-finite when any element is, or (rarely) when finite values overflow it."""
    sums = [t.detach().sum(dtype=torch.float32) if t.dtype in HALF else t.detach().sum()
            for t in ([output] if isinstance(output, torch.Tensor) else floating(output))
            if t.is_floating_point() and t.numel()]
    if not sums:
        return None
    return sums[0] if len(sums) == 1 else torch.stack([s.float() for s in sums]).sum()
