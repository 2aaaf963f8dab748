"""The step model: torch's hooks turned into phases and steps.

A step is what happens between two optimizer steps. ``StepModel`` installs the hooks
(global module hooks, the optimizer step hooks, thin wrappers around backward, the
DataLoader iterator, ``clip_grad_norm_``, ``zero_grad`` and GradScaler), keeps what the
step in progress is made of (``StepState``, the captured inputs a replay needs, the
per-step history) and tells its ``StepListener`` at each pause point. It knows nothing
of conditions, pausing or clients: that is the listener's business (the Session). What it
found of the program (roots, optimizers): ``ProgramObjects`` (program.py); when hooks act: ``Gate``.

Every hook here runs on every step of the user's loop: a few hundred bytecodes a step and
no syscall in the steady state (a 1.2 ms CPU step pays about 0.1 ms in all)."""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import torch

from stepdbg.agent.measure import kernel_choice, tensors
from stepdbg.agent.measure.frames import ModelCaller, caller_kwargs
from stepdbg.agent.measure.memory import HOST_MEMORY_PERIOD, memory_in_use
from stepdbg.agent.measure.warning_filters import Ignored
from stepdbg.agent.step import backward_capture, host_reads, micro_batches, upstream
from stepdbg.agent.step.buffer_copies import BufferCopies
from stepdbg.agent.step.collectives import Collectives
from stepdbg.agent.step.data_wait import DataWait
from stepdbg.agent.step.device_skip import DeviceSkip
from stepdbg.agent.step.hooks import Gate, Guard, HookSet, around_calls
from stepdbg.agent.step.optimizer_phase import OptimizerPhase
from stepdbg.agent.step.program import ProgramObjects
from stepdbg.agent.step.saved_activations import SavedActivations
from stepdbg.agent.step.step_history import StepHistory
from stepdbg.agent.step.step_state import StepListener, StepState
from stepdbg.agent.step.wrappers import patch_step_calls, patch_trainer_objects

HISTORY_LEN = 10_000
_FORCED_READS = {"1": True, "0": False}.get(os.environ.get("STEPDBG_DEFER_READS", ""))
# The step model's one clock: step start, phase times, step time and the last progress the
# stall watchdog compares with (time.monotonic: CLOCK_MONOTONIC on Linux, ns resolution).
_clock = time.monotonic


class StepModel(ProgramObjects, Gate):
    """Hooks → phases → steps, for one training thread."""

    def __init__(self, listener: StepListener, guard: Guard) -> None:
        super().__init__()
        self.listener = listener
        self.guard = guard
        self.optimizer_phase = OptimizerPhase(self)
        self.step = 0
        self.current: StepState | None = None
        self.history = StepHistory(HISTORY_LEN, lambda: self._last_optimizer())  # (and whether the LR warms up)
        # A replay's needs, from the forward: root, args, kwargs, rng, output, loss, batch, loader, called_from; armed: buffers, grad_output
        self.capture: dict[str, Any] = {}
        self.armed = False  # keep what a replay of the backward needs (costs one output-sized tensor)
        # armed: which micro-batch's backward made a NaN; the buffers the replay puts back
        self.backward_watch, self.buffer_copies = backward_capture.BackwardWatch(), BufferCopies()
        self.saved: SavedActivations | None = None  # saved activations by module (--record-memory)
        self.kept_by_stepdbg: list[Callable[[], Iterable[tuple[str, Any]]]] = []  # rewind snapshots
        # None: the loss is read before backward on the CPU, kept on an accelerator until the step's one
        # read (host_reads.py); STEPDBG_DEFER_READS=1/0 forces either (=1: the CPU reads as a GPU does).
        self.defer_reads: bool | None = _FORCED_READS
        self.last_progress = _clock()
        self._next_memory_read = 0.0
        self.overfit = False  # re-yield the first DataLoader batch every step (stepdbg overfit)
        self._overfit_batch: Any = None
        self._hooks = HookSet()
        self._discovery: list[Any] = []  # the global module hooks, until the roots are known
        self._depth = self._bwd_depth = 0
        self.scaled: dict[int, torch.Tensor] = {}
        self.in_scaler_step = self.in_optimizer_step = False
        self._in_forward_of: torch.nn.Module | None = None
        self.data = DataWait()
        self.collectives = Collectives()  # this rank's collectives (a hang across ranks)
        self.device_skip = DeviceSkip()  # --skip-on-device
        self.caller = ModelCaller()  # the user's frame that called the model: a break under a trainer
        self._indices: weakref.WeakKeyDictionary[Any, deque[list[Any]]] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ installing

    def install(self) -> None:
        """Install every hook and patch."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_mod

        self.active = True
        h = self._hooks
        # Global module hooks only until the roots are known (the first step), so the steady-state
        # cost does not grow with the modules; while they last, torch.compile's warning that they
        # fire again for its wrapper (ours return at once inside the trace) is ignored.
        self._discovery = [h.add(Ignored(r"Using `torch.compile\(module\)` when there are global hooks")),
                           h.add(nn_module.register_module_forward_pre_hook(self._fwd_pre)),
                           h.add(nn_module.register_module_forward_hook(self._fwd_post, always_call=True))]
        h.add(optim_mod.register_optimizer_step_pre_hook(self.optimizer_phase.pre_hook))
        h.add(optim_mod.register_optimizer_step_post_hook(self.guarded("optimizer", self.optimizer_phase.post_hook)))
        patch_step_calls(self, h)
        patch_trainer_objects(self, h)

    def _settle_roots(self) -> None:
        """After the first step: watch the roots seen (every model of a GAN's step, a
        compiled wrapper) and drop the global module hooks. A model first run later is
        not a root stepdbg sees (docs/step-model.md).

        A root is watched through its class's ``__call__``, not through hooks registered on
        the module: those live in the module's ``_forward_hooks`` and would travel with
        ``torch.save(model)``, ``deepcopy`` and every copy (DESIGN, invisible to the
        program). Other instances of the class pay one dict lookup."""
        for cls in {type(root) for root in list(self.roots.values())}:
            self._hooks.patch(cls, "__call__", around_calls(self._is_root, self._root_pre, self._root_post,
                                                            skip=_compiling))
        for handle in self._discovery:
            handle.remove()
        self._discovery = []

    def has_batch_to_repeat(self) -> bool:
        """Overfit mode: whether a DataLoader batch was taken to be yielded again."""
        return self._overfit_batch is not None

    def remove(self) -> None:
        self.active = False
        self._hooks.remove_all()

    def guarded(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def hook(*args: Any) -> None:
            if not _compiling():
                self.act(name, fn, *args)

        return hook

    # ------------------------------------------------------------------ module hooks (hot path)

    def _fwd_pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        """The global hook of the first step (the roots are not known yet)."""
        if not _compiling():  # inside torch.compile's trace: nothing of ours enters the graph (no break, same numbers)
            self._root_pre(module, args, None)

    def _fwd_post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if not _compiling():
            self._root_post(module, args, output)

    def _root_pre(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        """Before a module's forward: a root's, once the roots are known (around_calls, which
        leaves compiling out), else every module's (the global hook)."""
        if self.thread is not None and threading.get_ident() != self.thread:
            return  # forwards on other threads (an eval thread) are not the training step
        d = self._depth
        self._depth = d + 1
        if d == 0:
            if torch.is_grad_enabled():
                self.act("forward", self._on_root_forward, module, args, kwargs)
            elif self.is_model_module(module):
                self.act("doctor", self.listener.on_nograd_forward, module)

    def _root_post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self.thread is not None and threading.get_ident() != self.thread:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self.current is not None and self.current.forwards:
            if self._in_forward_of is module:  # (set for a root only)
                self.act("forward", self._on_root_forward_done, module, output)
        elif self._depth == 0 and not torch.is_grad_enabled() and self.tracking():
            self.data.evaluation_done()  # an evaluation forward between steps: not data wait

    def root(self) -> torch.nn.Module | None:
        """The model of the captured step, while the program keeps it."""
        ref = self.capture.get("root")
        return ref() if ref is not None else None

    def reset_depths(self) -> None:
        """An exception unwound the forward/backward: the next call starts at depth 0."""
        self._bwd_depth = self._depth = 0

    # ------------------------------------------------------------------ phases

    def ensure_step(self) -> StepState:
        if self.current is None:
            self.current = StepState(index=self.step, started=_clock())
        return self.current

    def progress(self) -> None:
        self.last_progress = _clock()

    def pause_point(self, phase: str) -> None:
        """The step reached `phase`: recorded, then the listener decides about pausing."""
        st = self.current or self.ensure_step()
        st.phase = phase
        self.last_progress = now = _clock()
        st.phase_times[phase] = now - st.started
        self.listener.pause_point(phase)

    def _on_loader_iter(self, it: Any, seconds: float) -> None:
        """An epoch's iterator: its start-up is the first step's data wait, and a stall
        before its first batch (workers that never start) can name its settings."""
        self.data.iter_started(seconds)
        self.capture["loader"] = weakref.ref(it)

    def _on_loader_next(self, it: Any, batch: Any, waited: float) -> None:
        st = self.ensure_step()
        st.loader_wait += self.data.loader_wait(waited)
        st.loader_calls += 1
        self.capture["batch"] = batch
        self.capture["loader"] = weakref.ref(it)
        pending = self._indices.get(it)
        ordered = getattr(it, "_in_order", True) is not False
        self.capture["sample_indices"] = pending.popleft() if pending and ordered else None
        self.progress()

    def _on_index(self, it: Any, index: Any) -> None:
        if isinstance(index, list) and len(index) <= 65_536:
            self._indices.setdefault(it, deque(maxlen=1_024)).append(index)

    def _on_root_forward(self, module: torch.nn.Module, args: tuple[Any, ...],
                         kwargs: dict[str, Any] | None) -> None:
        if self._discovery and not self._is_root(module):  # (settled: only a root's call reaches here)
            if not self.is_model_module(module):
                return
            self.roots[id(module)] = module
            self._root_refs[id(module)] = weakref.ref(module)
        if self.current is not None and self.current.update_refused:
            self.end_step()  # (its clip refused the gradients, and the program went on: no update came)
        st = self.current or self.ensure_step()
        st.forwards += 1
        self._in_forward_of = module
        cap = upstream.kept(self.capture, module)  # (the forward it held, when another model's)
        cap["root"] = self._root_refs[id(module)]  # weakly: the program alone keeps its model alive
        cap["args"] = args
        # A global hook gets no kwargs: they are read from torch's frame (the first step).
        cap["kwargs"] = caller_kwargs() if kwargs is None else kwargs  # the call's own **kwargs dict
        cap["step"] = st.index
        cap["rng"] = tensors.rng_state()
        cap["kernels"] = kernel_choice.current()  # the replay runs the kernels this forward runs
        cap["output"] = cap["grad_output"] = None
        cap["called_from"] = self.caller.called(module)  # the user's line that called the model (a data NaN entered there)
        if self.armed:
            cap["buffers"] = self.buffer_copies.take(module, st.index)
        if self.saved is not None:
            self.saved.start(module)
        if st.forwards == 1 and st.backward_calls == 0:
            first = args[0] if args and isinstance(args[0], torch.Tensor) else \
                tensors.first_tensor(args if args else cap["kwargs"])  # HF models take input_ids=
            st.batch_shape = list(first.shape) if first is not None else None
            st.data_wait = self.data.first_forward(bool(st.loader_calls), st.loader_wait)
            if "batch" not in cap or not st.loader_calls:
                cap["batch"] = args[0] if len(args) == 1 else args
            self.listener.on_batch(module, args)
            self.pause_point("before_forward")

    def _on_root_forward_done(self, module: torch.nn.Module, output: Any) -> None:
        self._in_forward_of = None
        self.capture["output"] = output
        if self.saved is not None:
            self.saved.stop()
        if output is None and sys.exc_info()[1] is not None:  # (always_call: the forward raised, never ended)
            return self.data.forward_done()
        if self.armed:
            backward_capture.keep_output_grad(self.capture, output)
        self.pause_point("after_forward")
        self.data.forward_done()  # after the pause point: time paused there is nobody's data wait

    def on_backward_pre(self, targets: Any) -> None:
        st = self.current or self.ensure_step()
        if self.armed and st.unread is not None:  # (a step of one backward: no call)
            self.backward_watch.before_backward(self)
        st.backward_calls += 1
        self.data.backward_started()
        t = targets if isinstance(targets, torch.Tensor) else tensors.first_tensor(targets)
        loss = self.scaled.pop(id(t), t) if t is not None else None
        self.capture["loss"] = loss
        if loss is not None and loss.numel() == 1:
            if host_reads.defers(loss, self.defer_reads) and not self.listener.reads_loss_at_backward():
                st.pending_losses.append(loss.detach())
                st.loss_captures.append(micro_batches.inputs_now(self))
            elif st.pending_outputs:  # the activation watch's sums on the device: one read for all
                st.pending_losses.append(loss.detach())
                host_reads.read_pending(st)
            else:
                st.losses.append(float(loss.item()))  # one element (as_float's work, inline: every step)
        self.listener.on_loss(loss)
        self.pause_point("before_backward")
        self._release_output()

    def _release_output(self) -> None:
        """The backward is next: the model's output is held weakly from here, as the program
        holds it (a GPT's logits would otherwise stay alive through the backward and the
        update, the peak of the step's memory). A loss kept on the device is read before
        the update: the output's sum goes with it (one reduction, no read of its own), so a
        NaN loss can still say whether the output was finite."""
        self.caller.release()
        out = self.capture.get("output")
        st = self.current
        if st is not None and st.pending_losses and len(st.pending_outputs) + st.outputs_read < st.forwards \
                and out is not None:
            total = tensors.output_sum(out)  # (unless the activation watch queued this forward's)
            if total is not None:
                st.pending_outputs.append(total)
        if out is not None and not isinstance(out, weakref.ReferenceType):
            try:
                self.capture["output"] = weakref.ref(out)
            except TypeError:  # a tuple or list of tensors: kept (small, or the program's own)
                pass

    def output(self) -> Any:
        """The model's output of the captured forward, while it is kept (before the backward,
        or while the program holds it)."""
        out = self.capture.get("output")
        return out() if isinstance(out, weakref.ReferenceType) else out

    def _on_backward_post(self) -> None:
        if self.armed:
            self.backward_watch.after_backward(self)
        self.pause_point("after_backward")
        if not self.in_optimizer_step and self._last_optimizer() is None and not self.optimizers:
            # Manual SGD: no optimizer object, one step per backward.
            st = self.ensure_step()
            st.grad_norm = host_reads.read_pending(st, self.grad_norm_on_device(self.model_params()))
            self.pause_point("before_optimizer_step")
            self.end_step()

    def _on_clip(self, norm: Any) -> None:
        if isinstance(norm, torch.Tensor):
            norm = norm.detach() if norm.requires_grad else norm  # (clip_grad_norm_'s is made under no_grad)
        else:
            norm = tensors.as_float(norm)
        (self.current or self.ensure_step()).clip_norm = norm

    def _on_zero_grad(self, obj: Any) -> None:
        if isinstance(obj, torch.optim.Optimizer) and self._last_optimizer() is not obj:
            self.know_optimizer(obj)
        (self.current or self.ensure_step()).zero_grad_called = True

    def on_scaler_step_done(self, opt: torch.optim.Optimizer) -> None:
        self.optimizer_phase.scaler_step_done(opt)

    def end_step(self) -> None:
        st = self.current
        if st is None:
            return
        if st.pending_losses:
            host_reads.read_pending(st)
        now = _clock()
        record = {
            "step": st.index,
            "loss": sum(st.losses) / len(st.losses) if st.losses else None,
            "grad_norm": st.grad_norm,
            "lr": self.lrs(),
            "data_wait": st.data_wait,
            "step_time": now - st.started,
            "fetch_in_step": self.data.fetched_in_step(),  # (in step_time: the next batch, nanoGPT's way)
            "mem": self._memory(now),
            "batch_shape": st.batch_shape,
            "skipped": st.skip or st.skipped_by_scaler,
            "skipped_by_scaler": st.skipped_by_scaler,
            "clipped": st.clipping,  # (the advice does not say "add clipping" to a loop that clips)
        }
        self.history.append(record)
        self.step += 1
        self.current = None
        if self._discovery and self.roots:
            self._settle_roots()
        self.in_optimizer_step = False
        self.listener.on_step_end(record)
        self.data.step_ended(time.perf_counter(), record)  # what the listener took is nobody's data wait

    # ------------------------------------------------------------------ measuring

    def _memory(self, now: float) -> int | None:
        """A step record's memory (CUDA allocated where CUDA is used, else host RSS) at
        most every HOST_MEMORY_PERIOD seconds, None between: each read costs tens of us."""
        if now < self._next_memory_read:
            return None
        self._next_memory_read = now + HOST_MEMORY_PERIOD
        return memory_in_use()

    def grad_norm_on_device(self, params: list[torch.nn.Parameter]) -> torch.Tensor | None:
        """The gradient norm over `params`, left on the device for the step's one read, when
        a condition reads it (nan, grad_norm>X, an expression); else None."""
        if not self.listener.needs_grad_norm():
            return None
        return tensors.total_norm([g for p in params if (g := p.grad) is not None])


def _compiling() -> bool:
    """True while torch.compile, torch.export or torch.jit.trace traces the model: a
    program's trace is not a training step, and a hook that returns on this adds nothing
    to the graph (dynamo folds it to a constant)."""
    return torch.compiler.is_compiling() or _jit_tracing()


# torch.jit.is_tracing() without its Python frame (asked at every hook entry); only reached
# outside torch.compile's trace, where the first test has answered.
_jit_tracing: Callable[[], bool] = getattr(torch._C, "_is_tracing", torch.jit.is_tracing)
