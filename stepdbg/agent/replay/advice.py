"""What to do about a non-finite value, from its cause: rules over measured values.

- the data (a non-finite value already in the batch, the inputs or the targets);
- divergence (the weights, the gradient norm or the loss had already exploded in the
  steps before, or a parameter is already non-finite): the learning rate, not the op
  that finally overflowed;
- a non-finite number the code wrote or computed outside autograd (`out * float("nan")`);
- a domain error (log, sqrt, div, pow, acos... met a value outside its domain): its guard;
- otherwise a numeric overflow in the op named.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from typing import Any

import torch

from stepdbg.agent.measure.tensors import local_shard
from stepdbg.agent.step.step_history import warmed_up

GUARDS = {
    "log": "clamp its input to a small positive minimum (x.clamp_min(1e-12)), or use log_softmax / log1p",
    "sqrt": "add an eps inside (torch.sqrt(x + 1e-12)): its gradient at 0 is infinite",
    "rsqrt": "add an eps inside (torch.rsqrt(x + 1e-6))",
    "div": "add an eps to the denominator, or mask the rows where it is 0",
    "reciprocal": "add an eps (1 / (x + 1e-12))",
    "pow": "keep the base positive (clamp_min) before a fractional or negative power",
    "acos": "clamp the input to [-1 + 1e-6, 1 - 1e-6]",
    "asin": "clamp the input to [-1 + 1e-6, 1 - 1e-6]",
    "atanh": "clamp the input to (-1, 1)",
    "softmax": "a row where every entry is masked: leave at least one position unmasked, or use a finite "
               "large negative (torch.finfo(dtype).min) instead of -inf",
}
WRITES = {"setitem", "index_put", "masked_fill", "masked_scatter", "index_fill", "fill", "copy", "scatter"}
_ALIASES = {"log2": "log", "log10": "log", "log1p": "log", "true_divide": "div", "__truediv__": "div",
            "__rtruediv__": "div", "__pow__": "pow", "__rpow__": "pow", "float_power": "pow", "acosh": "acos",
            "log_softmax": "softmax", "_softmax": "softmax", "scaled_dot_product_attention": "softmax",
            "multi_head_attention_forward": "softmax",
            "xlogy": "log", "logit": "log"}


def base_op(op: str | None) -> str:
    """'LogBackward0' -> 'log'; 'true_divide' -> 'div'; 'softmax' -> 'softmax'."""
    name = re.sub(r"Backward\d*$", "", op or "").lower().rstrip("_")
    return _ALIASES.get(name, name)


def diverging(history: Iterable[dict[str, Any]], params: list[torch.Tensor]) -> str | None:
    """Why the run had already diverged before this step, if it had."""
    with torch.no_grad():  # (of this rank's shards: a DTensor's maximum would be a collective)
        shards = [local_shard(p)[0].detach() for p in params]
        biggest = max((float(s.abs().max()) for s in shards if s.numel()), default=0.0)
    if not math.isfinite(biggest):
        return "a parameter is already non-finite: an earlier update made it so"
    if biggest > 1e6:
        return f"the weights reach {biggest:.3g} in absolute value"
    rows = list(history)[-50:]
    for key, what in (("grad_norm", "gradient norm"), ("loss", "loss")):
        vals = [r[key] for r in rows if isinstance(r.get(key), float) and math.isfinite(r[key])]
        if len(vals) >= 6:
            before, recent = statistics.median(vals[:-3]), max(vals[-3:])
            if before > 0 and recent > 100 * before:
                return f"the {what} rose from about {before:.3g} to {recent:.3g} in the last steps"
    return None


def stabilizers(history: Iterable[dict[str, Any]]) -> str:
    """What to add besides a lower LR, from what the loop already does: ", add warmup and
    gradient clipping", or the half it lacks, or that it has both. Clipping: most of the last
    steps clipped their gradients (a clip_grad_norm_ to an infinite norm, which only reads
    it, is none); warmup: step_history's, kept since the start where the history is the job's."""
    rows = list(history)
    lrs = [r.get("lr") if isinstance(r.get("lr"), list) else [] for r in rows]
    warm = getattr(history, "warms_up", None)
    recent = rows[-20:]
    has = {"warmup": warmed_up(lrs) if warm is None else warm,
           "gradient clipping": bool(recent) and 2 * sum(bool(r.get("clipped")) for r in recent) >= len(recent)}
    seen = getattr(history, "lr_seen", None)
    if not (any(lrs) if seen is None else seen):  # no optimizer's LR was seen: its warmup, if any, is the script's own
        unseen = "warmup if the loop has none (its learning rate is the script's own: stepdbg cannot read it)"
        if has["gradient clipping"]:
            return f", add {unseen}; the loop already clips the gradients"
        return f", add gradient clipping, and {unseen}"
    missing = [what for what, done in has.items() if not done]
    if not missing:
        return ": the loop already warms it up and clips the gradients"
    done = [what for what, d in has.items() if d]
    return ", add " + " and ".join(missing) + (f" (the loop already has {done[0]})" if done else "")


def advise(first: dict[str, Any] | None, history: Iterable[dict[str, Any]],
           params: list[torch.Tensor], optimizer: bool = True, clip_overflowed: bool = False) -> dict[str, str] | None:
    """{"cause": data | divergence | constant | domain | overflow, "text": what to do}.
    `optimizer`: the program steps an optimizer (else the console's `lr X pin` has no
    learning rate to set: the script updates the weights by hand). `clip_overflowed`: no op
    made it, clip_grad_norm_ did, from gradients whose norm overflowed (verdict.py)."""
    habits = stabilizers(history)  # (before the rows are listed: the job's history keeps its warmup)
    lower = "rate (lr X pin)" if optimizer else "rate (the script's own: it updates the weights by hand)"
    if first is None and clip_overflowed:
        return {"cause": "divergence",
                "text": f"the op is not the cause: the gradients' norm overflowed in clip_grad_norm_. Lower the learning "
                        f"{lower}{habits}; the weights grew over earlier updates, so go back to a checkpoint from "
                        "before them"}
    if first is None:
        return None
    history = list(history)
    if first.get("where") == "input" and first.get("computed"):
        return {"cause": "data",
                "text": f"{first.get('tensor')} was computed in this step from a model's output or parameters; what "
                        "autograd kept does not tell whether its non-finite values came from the data, that model or "
                        "the ops between: look at each"}
    if first.get("where") == "input":
        sample = f" (dataset index {first['sample']})" if first.get("sample") is not None else ""
        # (what it holds, and where, the replay's summary says above it: the advice said it again,
        # the seventeenth walk's 11)
        return {"cause": "data",
                "text": f"find the record {first.get('tensor')} came from{sample} and clean or filter it "
                        "(check for NaN/inf in the dataset or the collate_fn)"}
    if first.get("where") == "parameter" and first.get("written"):  # (param_writes: no update made it)
        return {"cause": "written",
                "text": f"the op and the learning rate are not the cause: {first.get('tensor')} became non-finite "
                        "between the steps, not in an update. Find what wrote it: a write to the weights (under "
                        "torch.no_grad), a checkpoint loaded, a hook, or the device (a flipped bit); a rewind or a "
                        "checkpoint from before it brings the weights back"}
    why = diverging(history, params)
    if first.get("where") == "parameter" or why:
        return {"cause": "divergence",
                "text": f"the op is not the cause; {why or 'a parameter is already non-finite'}. Lower the learning "
                        + lower + habits + "; the damage was done by an earlier update, so go "
                        "back to a checkpoint from before it"}
    op = base_op(first.get("op"))
    if first.get("constant"):
        return {"cause": "constant",
                "text": f"{first.get('op')} was given a {first['constant']} number that the code wrote or computed "
                        "(float('nan'), math.inf, a division by zero outside autograd): remove or guard it"}
    if op.strip("_") in WRITES:  # (h[0, 7] = nan: no overflow of finite inputs)
        return {"cause": "constant",
                "text": f"{first.get('op')} wrote a non-finite value into the tensor (a NaN or inf the code put there, "
                        "or copied from elsewhere): remove or guard it"}
    if op in GUARDS:
        return {"cause": "domain", "text": f"{op} met a value outside its domain: {GUARDS[op]}"}
    dtype = first.get("dtype")
    low = dtype in ("float16", "bfloat16")  # in float32 already, "compute it in float32" said nothing
    return {"cause": "overflow",
            "text": f"{first.get('op')} overflowed the {dtype or 'float'} range from finite inputs: scale its inputs "
                    "down (normalization, a smaller init)"
                    + (", or compute it in float32 (keep it out of autocast)" if low else "")}
