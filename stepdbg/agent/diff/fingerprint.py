"""A tensor's fingerprint for `stepdbg diff`: a few hundred bytes that stand for it.

``fingerprint(t)`` reads a tensor and returns a JSON-able dict: its shape, dtype, a hash
of its bytes (the bitwise comparison), how many of its values are not finite, four
statistics of the finite ones (mean, mean of |x|, root mean square, max |x|) and
SAMPLES values at evenly spaced positions (what ``--atol/--rtol`` compare). It only
reads: no gradient is recorded, no random number drawn, the tensor is not changed.

Bounded by construction: the tensor is read CHUNK values at a time (a device tensor is
copied to the host a chunk at a time, which waits for the device), so a fingerprint holds
at most a chunk beyond the tensor. An expanded view (a stride 0, `x.expand(10**9)`) is
never made whole: its values are those of the region it repeats, each the same number
of times, so that region is read (the hash is the region's bytes; `expanded` says by how
many times). A view that reads its storage over and over by other strides (`as_strided`,
`unfold`) and would cost more than 4 times its storage region is fingerprinted by that
region (said in `partial`). A nested tensor is read component after component (`parts`:
their shapes). The samples are gathered by index from the view itself. A tensor that
cannot be read (sparse, quantized, meta, a dtype torch cannot convert) is fingerprinted
as its shape and dtype and `unreadable`, a sentence saying why.

``tensors_in(obj)`` finds the tensors of a module's arguments or output (tuples, lists,
dicts, HF ModelOutputs), at most MAX_TENSORS of them, in order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from typing import Any

import torch

SAMPLES = 16  # values at evenly spaced positions of the flattened tensor
MAX_TENSORS = 8  # tensors fingerprinted per argument list or output
CHUNK = 1 << 22  # values read at a time (32 MB as float64)
MAX_PARTS_SHOWN = 16  # component shapes a nested tensor's fingerprint lists
_MAX_DEPTH = 4
_SUMMED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # summed as they are
# float4_e2m1fn_x2 holds two values a byte (the first in the low 4 bits) and has no kernels
# (no copy, no arithmetic): read as its bytes, each byte's two values decoded by this table.
_PACKED = {torch.float4_e2m1fn_x2} if hasattr(torch, "float4_e2m1fn_x2") else set()
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def fingerprint(t: Any) -> dict[str, Any]:
    """The fingerprint of `t` (a tensor; anything else is {"none": True} or its value)."""
    if t is None:
        return {"none": True}
    if not isinstance(t, torch.Tensor):
        return {"value": _plain(t)}
    head: dict[str, Any] = {"dtype": str(t.dtype).removeprefix("torch.")}
    try:
        with torch.no_grad():
            x = t.detach()
            packed = x.dtype in _PACKED
            if packed:
                x = x.view(torch.uint8)
                head["packed"] = "two e2m1 values a byte: the shape is in bytes, the values decoded"
            parts = list(x.unbind()) if x.is_nested else [x]
            if x.is_nested:
                head["shape"] = [len(parts)]
                head["parts"] = [list(p.shape) for p in parts[:MAX_PARTS_SHOWN]]
            else:
                head["shape"] = list(x.shape)
            why = _unreadable(x)
            if why:
                return {**head, "unreadable": why}
            return {**head, **_read(parts, packed)}
    except Exception as e:  # noqa: BLE001 - a tensor torch cannot read so is said, and the record goes on
        text = (str(e).strip().splitlines() or [""])[0][:200]
        return {**head, "shape": head.get("shape", []), "unreadable": f"not read: {type(e).__name__}: {text}"}


def _unreadable(x: torch.Tensor) -> str | None:
    if x.device.type == "meta":
        return "a meta tensor has no values"
    if x.is_quantized:
        return "a quantized tensor is not fingerprinted"
    if x.layout not in (torch.strided, torch.jagged):
        return f"a {str(x.layout).removeprefix('torch.')} tensor is not fingerprinted"
    return None


def _read(parts: list[torch.Tensor], packed: bool = False) -> dict[str, Any]:
    """Hash, statistics and samples of the values of `parts` one after the other (`packed`:
    bytes of float4 pairs, read as their decoded values)."""
    digest = hashlib.blake2b(digest_size=8)
    acc = _Stats()
    notes: list[str] = []
    expanded = 1
    for p in parts:
        region, times, note = _region(p)
        expanded = max(expanded, times)
        if note:
            notes.append(note)
        for piece in _pieces(region):
            piece = piece.resolve_conj().resolve_neg()
            if piece.is_complex():
                piece = torch.view_as_real(piece).reshape(-1)
            piece = piece.to("cpu")
            if piece.numel() == 1 and piece.stride(0) != 1:  # one value at stride 0 (an expanded 1-D view)
                piece = piece.as_strided((1,), (1,))
            if packed:
                piece = _unpacked(piece)
            digest.update(piece.view(torch.uint8).numpy())
            acc.add(piece, times)
    n = sum(p.numel() for p in parts)
    out: dict[str, Any] = {"hash": digest.hexdigest() if n else "empty", "nonfinite": acc.nonfinite,
                           "stats": acc.result(), "samples": _samples(parts, packed)}
    if expanded > 1:
        out["expanded"] = expanded
    if notes:
        out["partial"] = notes[0]
    return out


def _region(p: torch.Tensor) -> tuple[torch.Tensor, int, str | None]:
    """What to read of `p`: (a view, how many times each of its values stands in `p`, a
    note when that view is not `p`'s values). Its stride-0 dimensions are read at one index;
    a view that overlaps itself past 4 times its storage region is read as that region."""
    if p.layout != torch.strided:
        return p, 1, None
    index = tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for n, st in zip(p.shape, p.stride(), strict=True))
    region = p[index] if index else p
    times = p.numel() // region.numel() if region.numel() else 1
    span = 1 + sum((n - 1) * st for n, st in zip(region.shape, region.stride(), strict=True)) if region.numel() else 0
    if region.numel() > max(CHUNK, 4 * span):
        note = (f"a view of {region.numel():,} values that reads {span:,} of its storage over and over: "
                "the hash and statistics are that storage region's")
        return region.as_strided((span,), (1,), region.storage_offset()), 1, note
    return region, times, None


def _pieces(x: torch.Tensor) -> Iterator[torch.Tensor]:
    """`x`'s values in order, as 1-D contiguous pieces of at most CHUNK values (a view
    where `x` is contiguous, else a copy of the piece alone)."""
    if x.numel() <= CHUNK or x.dim() == 0:
        yield x.reshape(-1)
    elif x.dim() == 1:
        for i in range(0, x.shape[0], CHUNK):
            yield x[i:i + CHUNK].reshape(-1)
    else:
        inner = x[0].numel()
        if inner > CHUNK:
            for i in range(x.shape[0]):
                yield from _pieces(x[i])
        else:
            rows = CHUNK // inner
            for i in range(0, x.shape[0], rows):
                yield x[i:i + rows].reshape(-1)


class _Stats:
    """Running count of non-finite values and sums of the finite ones, over pieces."""

    def __init__(self) -> None:
        self.nonfinite = self.good = 0
        self.total = self.total_abs = self.norm = self.max_abs = 0.0

    def add(self, piece: torch.Tensor, times: int) -> None:
        """`piece` (1-D, on the host), each value standing for `times` values."""
        if piece.dtype in _SUMMED:
            v, acc = piece, (torch.float64 if piece.dtype == torch.float64 else torch.float32)
        elif piece.is_floating_point():  # float8: no arithmetic of its own
            v, acc = piece.to(torch.float32), torch.float32
        else:
            v, acc = piece.to(torch.float64), torch.float64
        n = v.numel()
        if not n:
            return
        got = _sums(v, acc)
        if got is None:  # finite values whose float32 sums overflow
            got = _sums(v.to(torch.float64), torch.float64)
        good, total, total_abs, norm, max_abs = got or (0, 0.0, 0.0, 0.0, 0.0)
        self.nonfinite += (n - good) * times
        self.good += good * times
        self.total += total * times
        self.total_abs += total_abs * times
        self.norm = math.hypot(self.norm, norm * math.sqrt(times))
        self.max_abs = max(self.max_abs, max_abs)

    def result(self) -> list[float]:
        """[mean, mean |x|, rms, max |x|] of the finite values."""
        if not self.good:
            return [0.0, 0.0, 0.0, 0.0]
        return [self.total / self.good, self.total_abs / self.good, self.norm / math.sqrt(self.good), self.max_abs]


def _sums(v: torch.Tensor, acc: torch.dtype) -> tuple[int, float, float, float, float] | None:
    """(count, sum, sum |x|, 2-norm, max |x|) of `v`'s finite values summed in `acc`; None
    when a sum overflows `acc`. A finite sum says every value is finite, without an
    element-wise check (a cast to float64 costs 25x a float32 norm)."""
    total = v.sum(dtype=acc)
    good = v
    if not bool(torch.isfinite(total)):
        good = v[torch.isfinite(v)]
        total = good.sum(dtype=acc)
    if not good.numel():
        return (0, 0.0, 0.0, 0.0, 0.0)
    # sum() adds pairwise; vector_norm(1 or 2) in float32 adds in turn, and 10**8 values of
    # 0.1 gave a mean |x| of 0.042 (torch 2.13).
    size = good.abs()
    out = (good.numel(), float(total), float(size.sum(dtype=acc)), math.sqrt(float(size.square().sum(dtype=acc))),
           float(size.max()))
    return out if all(math.isfinite(x) for x in out[1:]) or acc == torch.float64 else None


def _samples(parts: list[torch.Tensor], packed: bool = False) -> list[float]:
    """SAMPLES values at evenly spaced positions of the parts' values flattened one after
    the other (a complex value is two: real, imaginary; a packed float4 byte two values),
    gathered by index: nothing is made contiguous."""
    width = 2 if parts and (parts[0].is_complex() or packed) else 1
    sizes = [p.numel() * width for p in parts]
    n = sum(sizes)
    k = min(n, SAMPLES)
    # Evenly spaced positions in whole numbers (a float linspace rounds past the end above 2**24).
    picks = [i * (n - 1) // max(k - 1, 1) for i in range(k)]
    out: list[float] = []
    start = 0
    for p, size in zip(parts, sizes, strict=True):
        mine = [q - start for q in picks if start <= q < start + size]
        start += size
        if not mine:
            continue
        flat = p.view(-1) if p.is_contiguous() else p
        coords: list[list[int]] = [[] for _ in flat.shape]
        for q in mine:  # the position's index along each dimension, the last fastest
            rest = q // width
            for d in range(flat.dim() - 1, -1, -1):
                coords[d].append(rest % flat.shape[d])
                rest //= flat.shape[d]
        values = flat[tuple(torch.tensor(c, dtype=torch.long, device=flat.device) for c in coords)]
        values = values.resolve_conj().resolve_neg().to("cpu")
        if packed:
            values = _unpacked(values).view(-1, 2)[torch.arange(len(mine)), torch.tensor([q % 2 for q in mine])]
        elif width == 2:
            values = torch.view_as_real(values)[torch.arange(len(mine)), torch.tensor([q % 2 for q in mine])]
        out.extend(values.to(torch.float64).tolist())
    return out


def _unpacked(b: torch.Tensor) -> torch.Tensor:
    """Bytes of float4_e2m1fn_x2 pairs (1-D, on the host) as float32, two values a byte."""
    i = b.reshape(-1).to(torch.int64)
    table = torch.tensor(_E2M1, dtype=torch.float32)
    return torch.stack((table[i & 15], table[i >> 4]), dim=-1).reshape(-1)


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
