"""Whether the break's non-finite value came back when the replay ran the step again from
the same state: the first thing a person on a big run asks (Megatron-core re-runs a step
to tell a transient, hardware fault from a persistent one).

- ``reproduced: true``: the replay named where the value is born (the data, a parameter,
  an op): it comes from the model, the data or the state, and will come back. So too at a
  break for an exception that a non-finite value caused (a NaN that binary_cross_entropy
  refuses), where the break itself holds no non-finite scalar.
- ``reproduced: false``: the replay ran the stage where the value appeared (the forward,
  or the backward from the captured output gradient) from the step's starting state and
  everything stayed finite: a transient fault (a flaky device, a race, non-determinism).
- ``reproduced: null``: the replay could not tell (its own forward failed; the backward
  had no captured gradient to start from), the break held no non-finite value, or it was
  another rank's break (this rank's gradients took the value in through an all-reduce).

``exact`` says whether the replay runs the very kernels the step ran: CUDA without
``torch.use_deterministic_algorithms(True)`` may pick non-deterministic ones, so a value
that did not come back there may be non-determinism rather than hardware.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from stepdbg.agent.measure import rank_origin
from stepdbg.agent.measure.rank_origin import from_rank_words

NONFINITE_CONDITIONS = ("nan", "inf", "nonfinite", "activations")
REPRODUCED = "reproduced from the same state: the fault is in the model, the data or the state"
# Where the replay found the value already there, the verdict says which (after `the data: xb
# already holds 1 non-finite value` it said `the model, the data or the state`: the twentieth walk's 16).
REPRODUCED_AT = {"input": "reproduced from the same state: the value came with the data, not a transient fault",
                 "parameter": "reproduced from the same state: a parameter already holds it (the model's state), "
                              "not a transient fault"}


def reproduced(first: dict[str, Any]) -> str:
    """The verdict of a replay that found where the value is born (`first`)."""
    return REPRODUCED_AT.get(first.get("where"), REPRODUCED) if isinstance(first, dict) else REPRODUCED
TRANSIENT = ("not reproduced from the same state: a transient fault (a flaky device, a race, non-determinism); "
             "skip this step's update so it never reaches the weights (k in the TUI, skip at the console, "
             "--on-break skip), and run the step on other hardware to tell which")


FROM_ANOTHER_RANK = from_rank_words(None)
CLIP_OVERFLOWED = ("not a transient fault: the backward's gradients are finite (the replay's too), and clip_grad_norm_ "
                   "measured their norm as {norm}: the sum of their squares overflowed, and scaling by max_norm over "
                   "it made them 0 or NaN. The gradients are far too large: a divergence")


def judge(result: dict[str, Any], brk: Any, history: list[dict[str, Any]], params: list[torch.Tensor],
          original_output_finite: bool | None) -> None:
    """Set result["reproduced"], result["verdict"] (words) and result["exact"]."""
    result["exact"], why = _exact(params)
    if why:
        result["not_exact"] = why
    if result.get("first_nonfinite") is not None:  # (an exception's break too: BCE refuses a NaN input)
        result["reproduced"], result["verdict"] = True, reproduced(result["first_nonfinite"])
        rank_origin.publish(result.get("step"))  # (the other ranks' replays say it came from this one)
        return
    if not _fault_seen(brk, history):
        result["reproduced"], result["verdict"] = None, None
        return
    if result.get("forward_error"):
        result["reproduced"] = None
        result["verdict"] = "could not tell: the replay's own forward failed, so nothing is blamed"
        return
    other = _other_ranks_break(brk)
    if other is not None:  # its gradients took the value in from that rank (an all-reduce): no fault here
        result["reproduced"] = None
        result["verdict"] = (f"this rank's own step made no non-finite value: the break is rank {other}'s, whose "
                             "replay says where the value is born")
        return
    if result.get("backward_partial"):  # (the loss reached two of the model's outputs: one's part was replayed)
        result["reproduced"] = None
        result["verdict"] = ("could not tell: the loss reached several of the model's outputs and the backward was "
                             "replayed from one's gradient; a value born on another's path is not replayed")
        return
    result["reproduced"], result["verdict"] = _replayed_finite(result, brk, original_output_finite)
    if result["verdict"] == FROM_ANOTHER_RANK:
        source = _born_on(result.get("step"), brk)
        if source is not None:
            result["from_rank"], result["verdict"] = source, from_rank_words(source)


def _replayed_finite(result: dict[str, Any], brk: Any, original_output_finite: bool | None) -> tuple[bool | None, str]:
    """(reproduced, verdict) of a replay that stayed finite where the step did not."""
    replayed_finite = result.get("replayed_output_finite")
    micro = result.get("micro_batches") or 1
    if micro > 1 and not (getattr(brk, "details", None) or {}).get("forward"):  # gradient accumulation
        return None, (f"could not tell: the step ran {micro} micro-batches and the replay ran the last, which stays "
                      "finite; the value may come from an earlier one's forward or backward (not called transient: "
                      "it may come back)")
    if original_output_finite is False and replayed_finite:
        return False, TRANSIENT  # the step's output was not, the replay's is
    if original_output_finite and replayed_finite and getattr(brk, "phase", None) == "before_backward":
        return None, ("could not tell: the model's output was finite, in the step as in the replay; the value was born "
                      "in the loss computation, after the model, whose graph only a live replay searches "
                      "(--on-break replay: a bundle holds the model, not the loss's graph)")
    clip = result.get("clip_norm")
    if result.get("backward_replayed") and replayed_finite and clip == math.inf:  # (a NaN norm: a NaN gradient)
        return None, CLIP_OVERFLOWED.format(norm=clip)  # (clipping made it: not the hardware's)
    if result.get("backward_replayed") and replayed_finite and many_ranks(brk):
        return None, FROM_ANOTHER_RANK
    if result.get("grad_origin"):  # (grad_paths.py: the program's own code made them, not the device)
        return None, result["grad_origin"]["verdict"]
    if result.get("graph_cut"):
        return None, ("could not tell: the model's backward, replayed, is finite, and the loss's graph was too large "
                      "to read whether another of its paths into the parameters made them")
    if result.get("backward_replayed") and replayed_finite and (owners := _grads_elsewhere(result, brk)):
        return None, _elsewhere_words(result, owners)
    if result.get("backward_replayed") and replayed_finite:
        return False, TRANSIENT
    return None, ("could not tell: the replay did not run the stage where the value appeared (no gradient was "
                  "captured at the model output for its backward)")


def _elsewhere_words(result: dict[str, Any], owners: str) -> str:
    """Why a replay of the model fed by `owners` cannot tell: it did not follow the backward
    into theirs, or followed it (fed_backward.py) and that stayed finite too."""
    model = result["replayed_model"]
    if result.get("fed_backward_finite") == owners:
        return (f"could not tell: the non-finite gradients are {owners}'s, and the replay ran {model}'s forward and "
                f"backward and on into {owners}'s backward from {model}'s input, which all stay finite: they reached "
                f"{owners}'s gradients another way (another loss's backward, a hook, or a write into .grad)")
    return (f"could not tell: the non-finite gradients are {owners}'s, and the replay ran {model}'s forward "
            f"and backward, which stay finite; {owners}'s backward was not replayed (a live replay, "
            f"--on-break replay or r in the TUI, follows it where {model} took {owners}'s output itself; "
            "a bundle holds one model)")


def _grads_elsewhere(result: dict[str, Any], brk: Any) -> str | None:
    """The models (by their names in the program) whose parameters hold the break's
    non-finite gradients, when none of them is the replayed model's (a GAN's netG at G's
    step, whose capture is netD's forward); None otherwise, or when the model has no name."""
    prefix = result.get("replayed_model")
    bad = (getattr(brk, "details", None) or {}).get("nonfinite_grads")
    if not isinstance(prefix, str) or not prefix or not isinstance(bad, list):
        return None
    names = [n for n in bad if isinstance(n, str)]
    if not names or any(n.startswith(prefix + ".") for n in names):
        return None
    return " and ".join(sorted({n.split(".", 1)[0] for n in names})) or None


def many_ranks(brk: Any) -> bool:
    """A job of several ranks, whose gradients are reduced across them (DDP, FSDP): this
    one, or, replayed from a bundle, the job that saved it (its break's `world`)."""
    world = (getattr(brk, "details", None) or {}).get("world")
    return rank_origin.world() is not None or (isinstance(world, int) and world > 1)


def _born_on(step: Any, brk: Any) -> int | None:
    """The rank whose own step made the value: said in the job's store, or in the bundle."""
    recorded = (getattr(brk, "details", None) or {}).get("born_on_rank")
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else rank_origin.born_on(step)


def _other_ranks_break(brk: Any) -> int | None:
    """The rank whose break this rank paused for, when it is another's (Breaker.pause_for_rank)."""
    rank = (getattr(brk, "details", None) or {}).get("for_rank")
    return rank if rank is not None and brk.condition == f"rank {rank}" else None


def _fault_seen(brk: Any, history: list[dict[str, Any]]) -> bool:
    """The break (or, with none, the last step) holds a non-finite value."""
    if brk is not None:
        if any(c in NONFINITE_CONDITIONS for c in getattr(brk, "conditions", None) or [brk.condition]):
            return True
        scalars = brk.scalars
    else:
        scalars = history[-1] if history else {}
    return any(_nonfinite(scalars.get(k)) for k in ("loss", "grad_norm"))


def _nonfinite(v: Any) -> bool:
    if isinstance(v, str):  # the wire's "nan", "inf"
        return v in ("nan", "inf", "-inf")
    return isinstance(v, float) and not math.isfinite(v)


def _exact(params: list[torch.Tensor]) -> tuple[bool, str | None]:
    if any(p.is_cuda for p in params[:1]) and not torch.are_deterministic_algorithms_enabled():
        return False, ("CUDA may pick non-deterministic kernels (torch.use_deterministic_algorithms(True) makes "
                       "the replay exact): a value that did not come back may be non-determinism")
    return True, None
