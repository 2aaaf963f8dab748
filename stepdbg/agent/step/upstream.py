"""The last forward of every other model of the program, kept for the replay: a GAN's
discriminator is fed the generator's output (`netD(fake.detach())`), so a NaN in its input
may be born in the generator's forward, not in the data. The capture holds one forward, the
latest; before the next root's forward overwrites it, the one it held is kept here, under
its root, when that root is another model: its inputs and RNG state (references, as the
capture holds them) and its output, weakly (only to tell whether a later input is it).
"""

from __future__ import annotations

import weakref
from typing import Any

from stepdbg.agent.measure import tensors

KEPT = ("root", "args", "kwargs", "rng", "kernels", "buffers", "called_from", "step")


def kept(cap: dict[str, Any], module: Any) -> dict[str, Any]:
    """`cap`, the StepModel's capture, about to take `module`'s forward: the forward it
    holds is kept in cap["upstream"] (by its root's id) when its root is another model."""
    ref = cap.get("root")
    prev = ref() if isinstance(ref, weakref.ReferenceType) else None
    if prev is None or prev is module or cap.get("args") is None:
        return cap
    out = cap.get("output")
    out = out() if isinstance(out, weakref.ReferenceType) else tensors.first_tensor(out)
    record = {k: cap.get(k) for k in KEPT}
    try:
        record["output"] = weakref.ref(out) if out is not None else None
    except TypeError:
        record["output"] = None
    cap.setdefault("upstream", {})[id(prev)] = record
    return cap
