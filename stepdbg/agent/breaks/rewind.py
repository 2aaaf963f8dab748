"""Snapshots of the training state in memory, and rewinding a run to one of them in place.

A snapshot is taken where a step ends (after its optimizer update, before the loop's
scheduler step): the parameters and buffers of every root module, every optimizer's state
and param-group hyperparameters, the LR schedulers', GradScalers' and the RNGs' states.
Snapshot ``S`` is the state step ``S`` starts from.

A rewind restores one **in place**: the same parameter and state tensors get the saved
values (``copy_``), so the optimizer, DDP's buckets, a scheduler and any reference the
user's code holds stay valid. It is asked for at a break and done where that step ends,
after its update (which is dropped: the step is skipped), at the same point of the loop
where snapshots are taken; the loop then goes on with its next batch. The batches in
between are skipped, as in the usual recipe (roll back, skip the bad data, go on).

Which snapshot: the newest taken *before* the break's step (one taken at the start of the
break's own step may hold the damage already), not tried since by a rewind that ended in
another break (then an older one is used). Snapshots newer than the one restored belong
to the abandoned run and are dropped.

On CUDA the copy goes to pinned host memory on a side stream: the training stream waits
for it only before the next update changes the tensors it reads.
"""

from __future__ import annotations

import contextlib
import copy
import random
from dataclasses import dataclass
from typing import Any

import torch

from stepdbg.agent.measure import tensors
from stepdbg.agent.step.optimizer_phase import opt_params
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.agent_config import check_rewind

KEEP = 2


@dataclass
class Snapshot:
    step: int
    pairs: list[tuple[torch.Tensor, torch.Tensor]]  # (live tensor, saved copy)
    optimizers: list[tuple[Any, dict[Any, dict[str, Any]], list[dict[str, Any]]]]
    schedulers: list[tuple[Any, dict[str, Any]]]
    scalers: list[tuple[Any, dict[str, Any]]]
    rng: dict[str, Any]
    nbytes: int
    done: Any = None  # a CUDA event when the copy is asynchronous
    tried: bool = False


class NoSnapshot(RuntimeError):
    """There is no snapshot to rewind to."""


class Rewinder:
    """Takes snapshots every `every` steps (the newest `keep` are kept) and rewinds."""

    def __init__(self, model: StepModel) -> None:
        self.model = model
        # Off until configure(): no snapshots, no LR scale after a rewind, no limit on rewinds.
        self.every = 0
        self.keep = KEEP
        self.lr_scale = 1.0
        self.lr_steps = 0
        self.max_rewinds: int | None = None
        self.snapshots: list[Snapshot] = []
        model.kept_by_stepdbg.append(self.copies)
        self.rewinds = 0
        self.taken = 0
        self.agreed_step = -1  # the last step a rewind agreed between ranks was done at
        self.pending: Snapshot | None = None  # to restore where the current step ends
        self._scaled_left = 0
        self.scaled_lrs: list[tuple[dict[str, Any], Any]] = []  # (group, lr before scaling) until unscale_lr()
        self._stream: Any = None

    def configure(self, every: int | None = None, keep: int | None = None, lr_scale: float | None = None,
                  lr_steps: int | None = None, max_rewinds: int | None = None) -> None:
        check_rewind(every=every, keep=keep, lr_scale=lr_scale, lr_steps=lr_steps, max_rewinds=max_rewinds)
        self.every = self.every if every is None else every
        self.keep = self.keep if keep is None else keep
        self.lr_scale = self.lr_scale if lr_scale is None else float(lr_scale)
        self.lr_steps = self.lr_steps if lr_steps is None else lr_steps
        self.max_rewinds = self.max_rewinds if max_rewinds is None else max_rewinds
        del self.snapshots[: max(0, len(self.snapshots) - self.keep)]

    # ------------------------------------------------------------------ taking

    def idle(self) -> bool:
        """Nothing to do where a step ends: no snapshots kept, no rewind pending, no LR scaled
        (asked every step)."""
        return not self.every and self.pending is None and self._scaled_left <= 0

    def due(self, step: int) -> bool:
        return self.every > 0 and step > 0 and step % self.every == 0

    def take(self, step: int) -> Snapshot:
        """Copy the state the step `step` starts from (called where step - 1 ended)."""
        reuse = self.snapshots.pop(0) if len(self.snapshots) >= self.keep else None
        if reuse is not None and reuse.done is not None:
            reuse.done.synchronize()  # its copy (long done, keep steps ago) must not still write the buffers
        live = self._live_tensors()
        old = reuse.pairs if reuse is not None and _same_layout(reuse.pairs, live) else None
        stream = self._side_stream(live)
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            if stream is not None:
                stream.wait_stream(torch.cuda.current_stream())
            ctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
            with ctx:
                for k, t in enumerate(live):
                    dst = old[k][1] if old is not None else _host_buffer(t)
                    dst.copy_(t.detach(), non_blocking=t.is_cuda)
                    pairs.append((t, dst))
            done = None
            if stream is not None:
                done = torch.cuda.Event()
                done.record(stream)
        snap = Snapshot(
            step=step, pairs=pairs, optimizers=[self._optimizer_plan(opt, pairs) for opt in self._optimizers()],
            schedulers=[(s, copy.deepcopy(s.state_dict())) for s in list(self.model.schedulers)],
            scalers=[(s, copy.deepcopy(s.state_dict())) for s in list(self.model.scalers)],
            rng=_rng_state(), nbytes=sum(c.numel() * c.element_size() for _, c in pairs), done=done)
        self.snapshots.append(snap)
        self.taken += 1
        return snap

    def _optimizers(self) -> list[torch.optim.Optimizer]:
        return sorted(self.model.optimizers, key=id)

    def _live_tensors(self) -> list[torch.Tensor]:
        """Every tensor a rewind writes back: the roots' parameters and buffers, the
        optimizers' parameters and their state's tensors; each once."""
        seen: dict[int, torch.Tensor] = {}
        for root in sorted(self.model.roots.values(), key=id):
            for t in [*root.parameters(), *root.buffers()]:
                seen.setdefault(id(t), t)
        for opt in self._optimizers():
            for p in opt_params(opt):
                seen.setdefault(id(p), p)
                for v in opt.state.get(p, {}).values():
                    if isinstance(v, torch.Tensor):
                        seen.setdefault(id(v), v)
            for g in opt.param_groups:
                for k, v in g.items():
                    if k != "params" and isinstance(v, torch.Tensor):
                        seen.setdefault(id(v), v)
        return list(seen.values())

    def _optimizer_plan(self, opt: torch.optim.Optimizer, pairs: list[tuple[torch.Tensor, torch.Tensor]]
                        ) -> tuple[Any, dict[Any, dict[str, Any]], list[dict[str, Any]]]:
        """What the optimizer held: per parameter, its state (tensors by their saved copy),
        and each group's hyperparameters."""
        saved = {id(t): c for t, c in pairs}

        def keep(v: Any) -> Any:
            return ("tensor", v, saved[id(v)]) if isinstance(v, torch.Tensor) else ("value", copy.deepcopy(v))

        state = {p: {k: keep(v) for k, v in opt.state[p].items()} for p in opt_params(opt) if p in opt.state}
        groups = [{k: keep(v) for k, v in g.items() if k != "params"} for g in opt.param_groups]
        return opt, state, groups

    def _side_stream(self, live: list[torch.Tensor]) -> Any:
        if not any(t.is_cuda for t in live):
            return None
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    def before_update(self, opt: torch.optim.Optimizer) -> None:
        """The update is about to change the tensors an asynchronous copy reads: it waits;
        in the steps after a rewind, the LR is scaled."""
        if self.snapshots and self.snapshots[-1].done is not None:
            torch.cuda.current_stream().wait_event(self.snapshots[-1].done)
        if self._scaled_left > 0:
            self.scale_lr(opt)

    # ------------------------------------------------------------------ rewinding

    def choose(self, at_step: int, to_step: int | None = None) -> Snapshot:
        """The snapshot a rewind at `at_step` restores: the one taken at `to_step`, or the
        newest taken before `at_step` that no rewind has tried yet."""
        if to_step is not None:
            for snap in self.snapshots:
                if snap.step == to_step:
                    return snap
            have = ", ".join(str(s.step) for s in self.snapshots) or "none"
            raise NoSnapshot(f"no snapshot of step {to_step} (kept: {have})")
        before = [s for s in self.snapshots if s.step < at_step]
        for snap in reversed(before):
            if not snap.tried:
                return snap
        if not self.every:
            raise NoSnapshot("no snapshots are kept: start with --keep-every N (or watch(keep_every=N))")
        have = ", ".join(f"{s.step}{' (tried)' if s.tried else ''}" for s in self.snapshots) or "none yet"
        raise NoSnapshot(f"no snapshot from before step {at_step} to rewind to (kept: {have})")

    def restore(self, snap: Snapshot) -> None:
        """Put `snap` back into the live tensors and objects, in place."""
        if snap.done is not None:
            snap.done.synchronize()
        with torch.no_grad():
            for live, saved in snap.pairs:
                live.copy_(saved)  # the .data is written; autograd's version counter is not a concern here
        for opt, state, groups in snap.optimizers:
            _restore_optimizer(opt, state, groups)
        for sched, sd in snap.schedulers:
            sched.load_state_dict(copy.deepcopy(sd))
        for scaler, sd in snap.scalers:
            if sd:
                scaler.load_state_dict(copy.deepcopy(sd))
        _set_rng_state(snap.rng)
        snap.tried = True
        self.snapshots = [s for s in self.snapshots if s.step <= snap.step]
        self._scaled_left = self.lr_steps if self.lr_scale != 1.0 else 0

    def at_step_end(self, step: int) -> Snapshot | None:
        """Where a step ended (`step` is the next one): a pending rewind, else a snapshot when
        one is due. Returns the snapshot restored, if any."""
        if self._scaled_left > 0:
            self._scaled_left -= 1
        snap, self.pending = self.pending, None
        if snap is not None:
            self.restore(snap)
            return snap
        if self.due(step):
            self.take(step)
        return None

    # ------------------------------------------------------------------ the LR after a rewind

    def scale_lr(self, opt: torch.optim.Optimizer) -> None:
        """Before an update, during the steps after a rewind: the LR times lr_scale (the
        scheduler's or the loop's value stays theirs: it is put back after the update)."""
        if self._scaled_left <= 0:
            return
        for g in opt.param_groups:
            lr = g["lr"]
            self.scaled_lrs.append((g, lr.clone() if isinstance(lr, torch.Tensor) else lr))
            if isinstance(lr, torch.Tensor):
                lr.mul_(self.lr_scale)
            else:
                g["lr"] = lr * self.lr_scale

    def unscale_lr(self) -> None:
        for g, lr in self.scaled_lrs:
            if isinstance(lr, torch.Tensor):
                g["lr"].copy_(lr)
            else:
                g["lr"] = lr
        self.scaled_lrs = []

    def copies(self) -> list[tuple[str, torch.Tensor]]:
        """The snapshots' copies of the training state (the memory census counts them)."""
        return [(f"rewind snapshot of step {s.step}", saved) for s in self.snapshots for _, saved in s.pairs]

    def listing(self) -> list[dict[str, Any]]:
        return [{"step": s.step, "bytes": s.nbytes, "tried": s.tried} for s in self.snapshots]


def _restore_optimizer(opt: torch.optim.Optimizer, state: dict[Any, dict[str, Any]],  # noqa: C901 - state, param groups and the scheduler each restore differently; kept together so a rewind is read in one place
                       groups: list[dict[str, Any]]) -> None:
    def put(holder: dict[str, Any], key: str, plan: tuple[Any, ...]) -> None:
        if plan[0] == "value":
            holder[key] = copy.deepcopy(plan[1])
            return
        _, original, saved = plan
        current = holder.get(key)
        if current is not original:  # the optimizer replaced it since: give it back
            holder[key] = original
        original.copy_(saved)

    for p in list(opt.state.keys()):
        if p not in state:
            del opt.state[p]  # state made after the snapshot (a lazily started optimizer)
    for p, saved_state in state.items():
        live = opt.state[p]
        for key in [k for k in live if k not in saved_state]:
            del live[key]
        for key, plan in saved_state.items():
            put(live, key, plan)
    for g, saved_group in zip(opt.param_groups, groups, strict=False):
        for key, plan in saved_group.items():
            put(g, key, plan)


def _host_buffer(t: torch.Tensor) -> torch.Tensor:
    if t.is_cuda:
        return torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _same_layout(pairs: list[tuple[torch.Tensor, torch.Tensor]], live: list[torch.Tensor]) -> bool:
    return len(pairs) == len(live) and all(
        a is b and a.shape == c.shape and a.dtype == c.dtype for (a, c), b in zip(pairs, live, strict=True))


def _rng_state() -> dict[str, Any]:
    state = {"torch": tensors.rng_state(), "python": random.getstate()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:
        pass
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    tensors.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])

