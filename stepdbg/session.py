"""The agent: the step model, condition checks, breaks, controls and changes.

One ``Session`` lives in the training process. Torch hooks call its ``_on_*`` methods
on the training thread; everything a front end may ask for is a public method that is
safe to call from any thread (work that must run on the training thread, such as
evaluating code in the paused frame or replaying the step, is handed to it while it
is paused).
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
import os
import queue
import statistics
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from types import FrameType
from typing import Any

import torch

from . import conditions as cond_mod
from . import inspection, tensors
from .conditions import ACTIONS, Condition
from .hooks import HookSet
from .inspection import is_user_file
from .report import Report

EXIT_ABORT = 3
HISTORY_LEN = 10_000
SPIKE_WINDOW = 50
SPIKE_MIN_STEPS = 5



WAIT_SHOWN_AFTER = 1.0  # seconds without progress before status() says where the loop waits


class Abort(SystemExit):
    """Raised into the training loop by the `abort` action: ends the script with code 3."""

    def __init__(self) -> None:
        super().__init__(EXIT_ABORT)


class NotPaused(RuntimeError):
    """A request that needs the paused training thread arrived while the job runs."""


@dataclass
class Break:
    """Why and where the job stopped."""

    step: int
    phase: str
    condition: str
    reason: str
    scalars: dict[str, Any]
    where: dict[str, Any] | None
    details: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)  # wall clock, for latency and logs


@dataclass
class StepState:
    """What is known about the step in progress."""

    index: int
    started: float
    phase: str = "start"
    loader_wait: float = 0.0
    loader_calls: int = 0
    data_wait: float | None = None
    losses: list[float] = field(default_factory=list)
    grad_norm: float | None = None
    clip_norm: float | None = None
    backward_calls: int = 0
    forwards: int = 0
    zero_grad_called: bool = False
    phase_times: dict[str, float] = field(default_factory=dict)
    skip: bool = False
    skipped_by_scaler: bool = False
    optimizer_stepped: bool = False


def user_frame(start: FrameType | None) -> FrameType | None:
    """The innermost frame that belongs to the user's code (not torch, not stepdbg)."""
    f = start
    while f is not None:
        if is_user_file(f.f_code.co_filename):
            return f
        f = f.f_back
    return None


def where_of(frame: FrameType | None, lineno: int | None = None) -> dict[str, Any] | None:
    if frame is None:
        return None
    line = lineno or frame.f_lineno
    return {
        "file": os.path.abspath(frame.f_code.co_filename),
        "line": line,
        "function": frame.f_code.co_name,
        "code": linecache.getline(frame.f_code.co_filename, line).strip(),
    }


class Session:
    """The in-process debugger: one per training process."""

    def __init__(
        self,
        breaks: Iterable[str | Condition] = ("nan", "exception"),
        actions: Iterable[str] = ("report",),
        report: str | None = None,
        argv: list[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.disabled_breaks: set[str] = set()
        self.conditions: list[Condition] = [
            c if isinstance(c, Condition) else cond_mod.parse(c) for c in breaks
        ]
        self.actions = list(actions)
        # Actions nobody chose (the defaults): with a front end attached, a break pauses.
        self.actions_defaulted = False
        for a in self.actions:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}; known: {', '.join(ACTIONS)}")
        rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        if rank is not None and world not in (None, "1"):  # a rank of a distributed job
            from .report import rank_path

            self.report = Report(rank_path(report, int(rank)) if report else None, {"rank": int(rank)})
        else:
            self.report = Report(report)
        self.argv = list(argv if argv is not None else sys.argv)
        self.quiet = quiet
        self.pid = os.getpid()
        self.step = 0
        self.breaks: list[Break] = []
        self.changes: list[dict[str, Any]] = []
        self.replays: list[dict[str, Any]] = []
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_LEN)
        self.repeats: dict[str, int] = {}
        self._fired: dict[str, int] = {}
        self._cur: StepState | None = None
        self._hooks = HookSet()
        self._active = False
        self._thread: int | None = None
        self._depth = 0
        self._bwd_depth = 0
        self._busy = False  # True while we run model code ourselves (replay, eval, summaries)
        self._is_model: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()
        self._roots: weakref.WeakValueDictionary[int, torch.nn.Module] = weakref.WeakValueDictionary()
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._schedulers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._scaled: dict[int, torch.Tensor] = {}
        self._in_scaler_step = False
        self._in_optimizer_step = False
        self._in_forward_of: torch.nn.Module | None = None
        self._hidden: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._last_step_end: float | None = None
        self._last_progress = time.monotonic()
        self.disabled_hooks: set[str] = set()  # hooks that failed and turned themselves off
        self._pins: dict[tuple[int, int], float] = {}
        # What a replay needs, captured at the model's forward.
        self.capture: dict[str, Any] = {}
        self.armed = "replay" in self.actions
        # Pausing.
        self.paused: Break | None = None
        self._paused_frame: FrameType | None = None
        self._resume = threading.Event()
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._run_mode: tuple[str, Any] = ("run", None)
        # Called with (event, data) on the thread where it happens: "break", "paused",
        # "resumed", "step", "change", "replay". The server forwards them to clients.
        self.listeners: list[Callable[[str, Any], None]] = []
        self.frontends = 0
        self.wait_for_frontend = False  # serve mode: a pause waits for a client to attach
        self.detach_timeout: float | None = None
        self._alone_since: float | None = None
        self._end_requested = False
        self.server: Any = None
        self.doctor: Any = None  # a diagnostics.Doctor when rules are on (stepdbg doctor)
        self.stop_after: int | None = None  # end the run (exit 0) after this many steps
        self.overfit = False  # re-yield the first DataLoader batch every step (stepdbg overfit)
        self._overfit_batch: Any = None
        from .ranks import Ranks

        self.ranks = Ranks()
        self.on_stop: list[Callable[[], None]] = []  # run before the server says "exited"
        self._paused_cv = threading.Condition()
        self._watchdog: Any = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, scan_existing: bool = False) -> Session:
        """Install the hooks and write the start event. Idempotent.

        `scan_existing` looks for optimizers built before this call (``watch()`` in a
        script); the launcher starts the session before the script's first line.
        """
        if self._active:
            return self
        from . import __version__

        self._active = True
        self._install()
        if scan_existing:
            self._find_existing_optimizers()
        self.report.write(
            "start", pid=self.pid, argv=self.argv, torch=torch.__version__, stepdbg=__version__,
            breaks=[c.spec for c in self.conditions], actions=self.actions,
        )
        stall = [c for c in self.conditions if c.kind == "stall"]
        if stall:
            from .watchdog import Watchdog

            self._watchdog = Watchdog(self, stall[0])
            self._watchdog.start()
        os.register_at_fork(after_in_child=self._forked)
        return self

    def stop(self, exit_code: int | None = None, error: str | None = None) -> None:
        """Remove every hook, write the end event, close the report. `error`: the
        exception that ended the script, as its traceback's last lines."""
        if not self._active:
            return
        self._active = False
        if self._watchdog is not None:
            self._watchdog.stop()
        self._hooks.remove_all()
        for fn in self.on_stop:
            with contextlib.suppress(Exception):
                fn()
        if self.server is not None:
            self.server.stop(exit_code, error)
        self.report.write("end", exit_code=exit_code, error=error, steps=self.step, breaks=len(self.breaks),
                          repeats_not_reported=self.repeats)
        if self.repeats:
            self._say("conditions that stayed true (reported once): "
                      + ", ".join(f"{k} x{v}" for k, v in self.repeats.items()))
        self.report.close()

    def _forked(self) -> None:
        # A DataLoader worker (fork) inherits us; it must not report or pause.
        self._active = False
        self._watchdog = None

    def add_break(self, spec: str | Condition) -> Condition:
        c = spec if isinstance(spec, Condition) else cond_mod.parse(spec)
        self.conditions.append(c)
        if c.kind == "activations" and self._active:
            self._install_activation_hook()
        self._log_change("break_add", spec=c.spec)
        return c

    def break_specs(self) -> list[str]:
        return [c.spec for c in self.conditions]

    def breakpoints(self) -> list[dict[str, Any]]:
        """Each breakpoint with its kind, where it is checked and whether it is on."""
        return [{"spec": c.spec, "kind": c.kind, "phase": c.phase, "enabled": c.spec not in self.disabled_breaks}
                for c in self.conditions]

    def enable_break(self, spec: str, enabled: bool = True) -> None:
        if spec not in self.break_specs():
            raise KeyError(f"no breakpoint {spec!r}; set: {self.break_specs()}")
        (self.disabled_breaks.discard if enabled else self.disabled_breaks.add)(spec)
        self._log_change("break_enable", spec=spec, enabled=enabled)

    def remove_break(self, spec: str) -> None:
        before = len(self.conditions)
        self.conditions = [c for c in self.conditions if c.spec != spec]
        if len(self.conditions) == before:
            raise KeyError(f"no breakpoint {spec!r}; set: {[c.spec for c in self.conditions]}")
        self._log_change("break_remove", spec=spec)

    # ------------------------------------------------------------------ hooks

    def _install(self) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim import lr_scheduler
        from torch.optim import optimizer as optim_mod
        from torch.utils.data import dataloader

        h = self._hooks
        h.add(nn_module.register_module_forward_pre_hook(self._fwd_pre))
        h.add(nn_module.register_module_forward_hook(self._fwd_post, always_call=True))
        h.add(optim_mod.register_optimizer_step_pre_hook(self._guarded("optimizer", self._on_optimizer_pre)))
        h.add(optim_mod.register_optimizer_step_post_hook(self._guarded("optimizer", self._on_optimizer_post)))
        if any(c.kind == "activations" for c in self.conditions):
            self._install_activation_hook()

        session = self

        def wrap_backward(orig: Callable[..., Any]) -> Callable[..., Any]:
            def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
                outer = session._bwd_depth == 0 and session._tracking()
                session._bwd_depth += 1
                try:
                    if outer:
                        session._guard("backward", session._on_backward_pre, tensors)
                    result = orig(tensors, *args, **kwargs)
                finally:
                    session._bwd_depth -= 1
                if outer:
                    session._guard("backward", session._on_backward_post)
                return result

            return backward

        h.patch(torch.autograd, "backward", wrap_backward)

        def wrap_next(orig: Callable[..., Any]) -> Callable[..., Any]:
            def __next__(it: Any) -> Any:
                t0 = time.perf_counter()
                if session.overfit and session._overfit_batch is not None:
                    batch = session._overfit_batch  # the same batch again: overfit one batch
                else:
                    batch = orig(it)
                    if session.overfit:
                        session._overfit_batch = batch
                if session._tracking():
                    session._guard("dataloader", session._on_loader_next, it, batch, time.perf_counter() - t0)
                return batch

            return __next__

        h.patch(dataloader._BaseDataLoaderIter, "__next__", wrap_next)

        def wrap_clip(orig: Callable[..., Any]) -> Callable[..., Any]:
            def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
                norm = orig(*args, **kwargs)
                if session._tracking():
                    session._guard("clip", session._on_clip, norm)
                return norm

            return clip_grad_norm_

        for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
            h.patch(owner, "clip_grad_norm_", wrap_clip)

        def wrap_zero_grad(orig: Callable[..., Any]) -> Callable[..., Any]:
            def zero_grad(obj: Any, *args: Any, **kwargs: Any) -> Any:
                if session._tracking():
                    session._guard("zero_grad", session._on_zero_grad, obj)
                return orig(obj, *args, **kwargs)

            return zero_grad

        h.patch(torch.optim.Optimizer, "zero_grad", wrap_zero_grad)
        h.patch(torch.nn.Module, "zero_grad", wrap_zero_grad)

        def wrap_opt_init(orig: Callable[..., Any]) -> Callable[..., Any]:
            def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
                orig(opt, *args, **kwargs)
                session._optimizers.add(opt)

            return __init__

        h.patch(torch.optim.Optimizer, "__init__", wrap_opt_init)

        def wrap_sched_step(orig: Callable[..., Any]) -> Callable[..., Any]:
            def step(sched: Any, *args: Any, **kwargs: Any) -> Any:
                session._schedulers.add(sched)
                return orig(sched, *args, **kwargs)

            return step

        h.patch(lr_scheduler.LRScheduler, "step", wrap_sched_step)

        def wrap_scale(orig: Callable[..., Any]) -> Callable[..., Any]:
            def scale(scaler: Any, outputs: Any) -> Any:
                scaled = orig(scaler, outputs)
                if isinstance(scaled, torch.Tensor) and isinstance(outputs, torch.Tensor):
                    session._scaled = {id(scaled): outputs}
                return scaled

            return scale

        def wrap_scaler_step(orig: Callable[..., Any]) -> Callable[..., Any]:
            def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
                if not session._tracking() or session._in_scaler_step:
                    return orig(scaler, optimizer, *args, **kwargs)
                session._in_scaler_step = True
                try:
                    result = orig(scaler, optimizer, *args, **kwargs)
                finally:
                    session._in_scaler_step = False
                session._guard("scaler", session._on_scaler_step_done, optimizer)
                return result

            return step

        def wrap_init_pg(orig: Callable[..., Any]) -> Callable[..., Any]:
            def init_process_group(*args: Any, **kwargs: Any) -> Any:
                session.ranks.job_started(kwargs.get("timeout"))
                result = orig(*args, **kwargs)
                session._guard("ranks", session.ranks.active)  # says which node this rank is on
                if session.frontends:
                    session._guard("ranks", session.ranks.raise_timeout)
                return result

            return init_process_group

        if torch.distributed.is_available():
            h.patch(torch.distributed, "init_process_group", wrap_init_pg)
        h.patch(torch.amp.GradScaler, "scale", wrap_scale)
        h.patch(torch.amp.GradScaler, "step", wrap_scaler_step)

    def _install_activation_hook(self) -> None:
        from torch.nn.modules import module as nn_module

        if "activations" not in {getattr(h, "_stepdbg", None) for h in self._hooks.handles}:
            handle = nn_module.register_module_forward_hook(self._guarded("activations", self._on_activation))
            handle._stepdbg = "activations"  # type: ignore[attr-defined]
            self._hooks.add(handle)

    def _find_existing_optimizers(self) -> None:
        # watch() may come after the optimizer was built; without knowing it, a second
        # micro-batch would look like a manual-SGD step.
        import gc
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # isinstance on deprecated module proxies warns
            for obj in gc.get_objects():
                if isinstance(obj, torch.optim.Optimizer):
                    self._optimizers.add(obj)

    def _tracking(self) -> bool:
        if not self._active or self._busy or self.paused is not None:
            return False
        tid = threading.get_ident()
        if self._thread is None:
            self._thread = tid
        return tid == self._thread

    def _guarded(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def hook(*args: Any) -> Any:
            if self._tracking():
                self._guard(name, fn, *args)
            return None

        return hook

    def _guard(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a hook body; a failure logs once and turns that hook off, never raises."""
        if name in self.disabled_hooks:
            return None
        try:
            return fn(*args)
        except (Abort, KeyboardInterrupt):
            raise
        except Exception as e:
            self.disabled_hooks.add(name)
            self._say(f"internal error in the {name} hook, which is now off: {type(e).__name__}: {e}")
            self.report.write("error", hook=name, error=f"{type(e).__name__}: {e}",
                              traceback=traceback.format_exc())
            return None

    # ------------------------------------------------------------------ module hooks (hot path)

    def _fwd_pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self._thread is not None and threading.get_ident() != self._thread:
            return  # forwards on other threads (an eval thread) are not the training step
        d = self._depth
        self._depth = d + 1
        if d == 0 and self._tracking():
            if torch.is_grad_enabled():
                self._guard("forward", self._on_root_forward, module, args)
            elif self.doctor is not None and self._is_model_module(module):
                self._guard("doctor", self.doctor.on_nograd_forward, self, module)

    def _fwd_post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self._thread is not None and threading.get_ident() != self._thread:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self._cur is not None and self._cur.forwards and self._tracking():
            if self._roots.get(id(module)) is module and self._in_forward_of is module:
                self._guard("forward", self._on_root_forward_done, module, output)

    def _is_model_module(self, module: torch.nn.Module) -> bool:
        known = self._is_model.get(module)
        if known is None:
            known = any(p.requires_grad for p in module.parameters())
            self._is_model[module] = known
        return known

    # ------------------------------------------------------------------ step model

    def _ensure_step(self) -> StepState:
        if self._cur is None:
            self._cur = StepState(index=self.step, started=time.perf_counter())
        return self._cur

    def _on_loader_next(self, it: Any, batch: Any, waited: float) -> None:
        st = self._ensure_step()
        st.loader_wait += waited
        st.loader_calls += 1
        self.capture["batch"] = batch
        self.capture["loader"] = weakref.ref(it)
        self._progress()

    def _on_root_forward(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if not self._is_model_module(module):
            return
        st = self._ensure_step()
        st.forwards += 1
        self._roots[id(module)] = module
        self._in_forward_of = module
        cap = self.capture
        cap["root"] = module
        cap["args"] = args
        cap["kwargs"] = _caller_kwargs()
        cap["step"] = st.index
        cap["rng"] = _rng_state()
        cap["output"] = None
        cap["grad_output"] = None
        if self.armed:
            cap["buffers"] = {n: b.detach().clone() for n, b in module.named_buffers()}
        if st.forwards == 1 and st.backward_calls == 0:
            if st.loader_calls:
                st.data_wait = st.loader_wait
            elif self._last_step_end is not None:
                st.data_wait = time.perf_counter() - self._last_step_end
            if "batch" not in cap or not st.loader_calls:
                cap["batch"] = args[0] if len(args) == 1 else args
            if self.doctor is not None:
                self._guard("doctor", self.doctor.on_batch, self, module, args)
            self._pause_point("before_forward")

    def _on_root_forward_done(self, module: torch.nn.Module, output: Any) -> None:
        self._in_forward_of = None
        self.capture["output"] = output
        if self.armed:
            out = _first_tensor(output)
            if out is not None and out.requires_grad:
                cap = self.capture

                def keep_grad(g: torch.Tensor) -> None:
                    cap["grad_output"] = g.detach()

                out.register_hook(keep_grad)
        self._pause_point("after_forward")

    def _on_backward_pre(self, targets: Any) -> None:
        st = self._ensure_step()
        st.backward_calls += 1
        t = targets if isinstance(targets, torch.Tensor) else _first_tensor(targets)
        loss = self._scaled.pop(id(t), t) if t is not None else None
        self.capture["loss"] = loss
        if loss is not None and loss.numel() == 1:
            st.losses.append(tensors.as_float(loss))
        if self.doctor is not None:
            self._guard("doctor", self._doctor_before_backward, loss)
        self._pause_point("before_backward")

    def _on_backward_post(self) -> None:
        st = self._ensure_step()
        self._pause_point("after_backward")
        if not self._optimizers and not self._in_optimizer_step:
            # Manual SGD: no optimizer object, one step per backward.
            st.grad_norm = self._measure_grad_norm(self._model_params())
            self._pause_point("before_optimizer_step")
            self._end_step()

    def _on_clip(self, norm: Any) -> None:
        self._ensure_step().clip_norm = tensors.as_float(norm)

    def _on_zero_grad(self, obj: Any) -> None:
        if isinstance(obj, torch.optim.Optimizer):
            self._optimizers.add(obj)
        self._ensure_step().zero_grad_called = True

    def _on_optimizer_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._optimizers.add(opt)
        st = self._ensure_step()
        self._in_optimizer_step = True
        self._apply_pins(opt)
        if st.clip_norm is not None:
            st.grad_norm = st.clip_norm
        else:
            st.grad_norm = self._measure_grad_norm(_opt_params(opt))
        if self.doctor is not None:
            self._guard("doctor", self._doctor_before_update, opt)
        if self.ranks.active():
            req = self._guard("ranks", self.ranks.due, self.step)
            if req is not None:
                self._pause_for_rank(req)
        self._pause_point("before_optimizer_step")
        if st.skip:
            self._hide_grads(opt)

    def _on_optimizer_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._in_optimizer_step = False
        st = self._ensure_step()
        self._restore_grads()
        if self.doctor is not None:
            self._guard("doctor", self.doctor.on_update, self, _opt_params(opt))
        st.optimizer_stepped = True
        self._pause_point("after_optimizer_step")
        if not self._in_scaler_step:
            self._end_step()

    def _on_scaler_step_done(self, opt: torch.optim.Optimizer) -> None:
        st = self._ensure_step()
        if not st.optimizer_stepped:
            # The scaler found inf/nan in the scaled gradients and skipped the update:
            # that is how AMP works, not a NaN to report.
            st.skipped_by_scaler = True
        self._end_step()

    def _end_step(self) -> None:
        st = self._cur
        if st is None:
            return
        now = time.perf_counter()
        self.history.append({
            "step": st.index,
            "loss": statistics.fmean(st.losses) if st.losses else None,
            "grad_norm": st.grad_norm,
            "lr": self._lrs(),
            "data_wait": st.data_wait,
            "step_time": now - st.started,
            "mem": inspection.memory_in_use(),
            "skipped": st.skip or st.skipped_by_scaler,
            "skipped_by_scaler": st.skipped_by_scaler,
        })
        if self.listeners:
            self._emit("step", self.history[-1])
        self.step += 1
        self._cur = None
        self._last_step_end = now
        self._in_optimizer_step = False
        if self.doctor is not None:
            self._guard("doctor", self.doctor.on_step_end, self)
        if self.stop_after is not None and self.step >= self.stop_after:
            self._finish_early()

    def _doctor_before_backward(self, loss: torch.Tensor | None) -> None:
        self.doctor.on_loss(self, loss)
        reason = self._check_stale_grad()
        if reason:
            self.doctor.add(self, "stale_grad", "error", reason, "call optimizer.zero_grad() once per optimizer step")

    def _doctor_before_update(self, opt: torch.optim.Optimizer) -> None:
        self.doctor.on_grads(self, _opt_params(opt))
        if self.step == 1 and self.armed:
            from .diagnostics import determinism_check

            r = determinism_check(self)
            self.report.write("determinism", step=self.step, **r)
            if r.get("checked") and not r["reproducible"]:
                self.doctor.add(self, "nondeterministic", "warning",
                                f"replaying step {self.step} twice from the same state differs by up to "
                                f"{max(r['max_output_diff'], r['max_grad_diff']):.3g}: {r['cause']}",
                                "seed every RNG the step uses (random, numpy, torch) and "
                                "torch.use_deterministic_algorithms(True)", **r)

    def _pause_for_rank(self, req: dict[str, Any]) -> None:
        """Every rank, the one that broke included, pauses here for a rank's break."""
        mine = req["rank"] == self.ranks.rank
        self._fired[req["condition"]] = self.step  # the job broke once, not once per rank
        self._ensure_step().phase = "before_optimizer_step"
        reason = (f"paused at step {self.step} for this rank's break at step {req['broke_at']}: {req['reason']}"
                  if mine else f"paused for rank {req['rank']}'s break at step {req['broke_at']}: {req['reason']}")
        self._break(req["condition"] if mine else f"rank {req['rank']}", reason, phase="before_optimizer_step",
                    actions=["pause"], details={"for_rank": req["rank"], "broke_at": req["broke_at"]},
                    coordinated=True)

    def _finish_early(self) -> None:
        """End a doctor/overfit run after its steps: exit code 0 from the script's point of view."""
        if self.overfit and self.doctor is not None:
            from .diagnostics import overfit_verdict

            losses = [h["loss"] for h in self.history if h["loss"] is not None]
            ok, words = overfit_verdict(losses)
            self.report.write("overfit", losses=losses, reached_near_zero=ok, verdict=words)
            if not ok:
                self.doctor.add(self, "cannot_overfit", "error", words,
                                "check for frozen layers (requires_grad), a too-low LR, the loss reduction "
                                "(sum vs mean) and that targets match the outputs")
            else:
                self._say(words)
        self._say(f"stopping after {self.step} steps as asked")
        raise SystemExit(0)

    def _progress(self) -> None:
        self._last_progress = time.monotonic()

    # ------------------------------------------------------------------ measuring

    def _measure_grad_norm(self, params: list[torch.nn.Parameter]) -> float | None:
        # Only when a condition reads it: nan, grad_norm>X, or an expression naming it.
        if not any(c.kind in ("nan", "grad_norm") or "grad_norm" in c.names for c in self.conditions):
            return None
        norm = tensors.total_norm(p.grad for p in params if p.grad is not None)
        return None if norm is None else float(norm)  # the one host sync of the step

    def _model_params(self) -> list[torch.nn.Parameter]:
        seen: dict[int, torch.nn.Parameter] = {}
        for root in list(self._roots.values()):
            for p in root.parameters():
                if p.requires_grad:
                    seen[id(p)] = p
        return list(seen.values())

    def _params_of_step(self) -> list[torch.nn.Parameter]:
        params = [p for opt in list(self._optimizers) for p in _opt_params(opt)]
        return params or self._model_params()

    def _lrs(self) -> list[float]:
        for opt in list(self._optimizers):
            return [tensors.as_float(g.get("lr")) for g in opt.param_groups]
        return []

    def scalars(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """The step's scalars, as conditions and reports see them; only `names` when given
        (the hot path asks for what its conditions read, nothing more)."""
        st = self._cur
        want = set(cond_mod.SCALAR_PHASE) if names is None else set(names)
        out: dict[str, Any] = {"step": self.step}
        if "loss" in want:
            out["loss"] = st.losses[-1] if st and st.losses else None
        if "loss_median" in want:
            losses = [h["loss"] for h in list(self.history)[-SPIKE_WINDOW:] if h["loss"] is not None]
            out["loss_median"] = statistics.median(losses) if len(losses) >= SPIKE_MIN_STEPS else None
        if "grad_norm" in want:
            out["grad_norm"] = st.grad_norm if st else None
        if "lr" in want:
            lrs = self._lrs()
            out["lr"] = lrs[0] if lrs else None
        if "data_wait" in want:
            out["data_wait"] = st.data_wait if st else None
        if "step_time" in want:
            out["step_time"] = self.history[-1]["step_time"] if self.history else None
        if "mem" in want:
            out["mem"] = inspection.memory_in_use()
        return out

    def param_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for root in list(self._roots.values()):
            for n, p in root.named_parameters():
                names.setdefault(id(p), n)
        return names

    # ------------------------------------------------------------------ conditions

    def _pause_point(self, phase: str) -> None:
        if self._end_requested:
            self._say(f"ending the job (exit code {EXIT_ABORT}) as asked by a client")
            raise Abort()
        st = self._ensure_step()
        st.phase = phase
        st.phase_times[phase] = time.perf_counter() - st.started
        self._progress()
        hit = self._check(phase)
        if hit is not None and not self._repeat(hit[0]):
            self._break(*hit, phase=phase)
            return
        stop = self._control_stop(phase)
        if stop:
            self._break("pause", stop, phase=phase, actions=["pause"])

    def _repeat(self, spec: str) -> bool:
        """True when `spec` fired in this step or the one before: a NaN that stays, or a
        norm that stays high, is one break, not one per step. Counted in the end event."""
        last = self._fired.get(spec)
        self._fired[spec] = self.step
        if last is not None and self.step - last <= 1 and not spec.startswith(("step", "every")):
            self.repeats[spec] = self.repeats.get(spec, 0) + 1
            return True
        return False

    def _check(self, phase: str) -> tuple[str, str, dict[str, Any]] | None:
        scalars: dict[str, Any] | None = None
        for c in self.conditions:
            if c.spec in self.disabled_breaks:
                continue
            if c.kind == "nan":
                found = self._check_nonfinite(phase)
                if found:
                    return c.spec, found[0], found[1]
            elif c.kind == "stale_grad":
                if phase == "before_backward":
                    reason = self._check_stale_grad()
                    if reason:
                        return c.spec, reason, {}
            elif c.phase == phase:
                if scalars is None:
                    scalars = self.scalars(n for c2 in self.conditions if c2.phase == phase for n in c2.reads)
                reason = c.check(scalars)
                if reason:
                    return c.spec, reason, {}
        return None

    def _check_nonfinite(self, phase: str) -> tuple[str, dict[str, Any]] | None:
        st = self._cur
        assert st is not None
        if phase == "before_backward" and st.losses and not math.isfinite(st.losses[-1]):
            loss = st.losses[-1]
            details: dict[str, Any] = {}
            bad_params = tensors.nonfinite_names(self._named(self._params_of_step(), grads=False))
            out = _first_tensor(self.capture.get("output"))
            if bad_params:
                details["nonfinite_params"] = bad_params
                why = f"parameters {', '.join(bad_params[:3])} are non-finite (the update of the previous step made them so)"
            elif out is not None and not bool(torch.isfinite(out.detach()).all()):
                details["model_output"] = "nonfinite"
                why = "the model output is already non-finite: it was born in the forward"
            else:
                details["model_output"] = "finite"
                why = "the model output is finite: it was born in the loss computation"
            return f"loss is {_fmt_nonfinite(loss)}; {why}", details
        if phase == "before_optimizer_step" and st.grad_norm is not None and not math.isfinite(st.grad_norm):
            bad = tensors.nonfinite_names(self._named(self._params_of_step(), grads=True))
            if not bad:
                return None  # a finite gradient whose norm overflowed is not a NaN
            return (
                f"gradient norm is {_fmt_nonfinite(st.grad_norm)}: non-finite gradients in {', '.join(bad[:3])}"
                + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""),
                {"nonfinite_grads": bad},
            )
        return None

    def _check_stale_grad(self) -> str | None:
        st = self._cur
        assert st is not None
        if st.index == 0 or st.backward_calls != 1 or st.zero_grad_called:
            return None
        if not self._optimizers:
            return None
        grads = [p.grad for p in self._params_of_step() if p.grad is not None]
        if not grads:
            return None
        norm = tensors.total_norm(grads)
        if norm is None or float(norm) == 0.0:
            return None
        return (
            f"the gradients of step {st.index - 1} are still in .grad at this step's backward "
            f"(norm {float(norm):.4g}): optimizer.zero_grad() was not called, so gradients "
            "accumulate across steps"
        )

    def _named(self, params: list[torch.nn.Parameter], grads: bool) -> list[tuple[str, torch.Tensor]]:
        names = self.param_names()
        return [
            (names.get(id(p), f"param#{i}") + (".grad" if grads else ""), p.grad if grads else p)
            for i, p in enumerate(params)
            if (p.grad is not None or not grads)
        ]

    def _on_activation(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        out = _first_tensor(output)
        if out is None or not out.is_floating_point() or bool(torch.isfinite(out).all()):
            return
        inputs = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if any(not bool(torch.isfinite(a).all()) for a in inputs):
            return  # passed on, not produced here
        spec = next(c.spec for c in self.conditions if c.kind == "activations")
        if self._repeat(spec):  # the innermost module reports first; its parents passed it on
            return
        name = inspection.module_name(self._roots.values(), module)
        self._break(spec, f"module {name} ({type(module).__name__}) produced a non-finite output from finite inputs",
                    phase="forward", details={"module": name, "module_type": type(module).__name__})

    # ------------------------------------------------------------------ breaks

    def _break(
        self,
        condition: str,
        reason: str,
        details: dict[str, Any] | None = None,
        phase: str | None = None,
        actions: list[str] | None = None,
        frame: FrameType | None = None,
        coordinated: bool = False,
    ) -> Break:
        st = self._cur
        scalars = self.scalars()
        frame = frame or user_frame(sys._getframe(1))
        brk = Break(
            step=st.index if st else self.step,
            phase=phase or (st.phase if st else "none"),
            condition=condition,
            reason=reason,
            scalars=self._break_scalars(scalars),
            where=where_of(frame),
            details=details or {},
        )
        self.breaks.append(brk)
        self.report.write("break", **asdict(brk))
        self._emit("break", asdict(brk))
        self._say(f"break at step {brk.step} ({brk.phase}) [{condition}]: {reason}"
                  + (f"\n  at {brk.where['file']}:{brk.where['line']}  {brk.where['code']}" if brk.where else ""))
        self._paused_frame = frame  # the frame the actions (replay, the console) look at
        try:
            if actions is None:
                actions = ["pause"] if self.frontends and self.actions_defaulted else self.actions
            if ("pause" in actions and not coordinated and condition != "pause" and phase != "exception"
                    and self.ranks.active()):
                # Pause the whole job together, outside any collective (see ranks.py).
                target = self._guard("ranks", self.ranks.request_pause, brk.step, brk.phase, reason, condition)
                if target is not None:  # else (the store is gone) this rank pauses alone
                    brk.details["pause_at_step"] = target
                    actions = [a for a in actions if a != "pause"]
            for action in actions:
                if action == "replay":
                    self.replay()
                elif action == "skip":
                    self.skip_step()
                elif action == "abort":
                    self._say(f"aborting (exit code {EXIT_ABORT}) as asked by --on-break abort")
                    raise Abort()
                elif action == "pause":
                    self._pause(brk)
        finally:
            self._paused_frame = None
        return brk

    def _break_scalars(self, scalars: dict[str, Any] | None = None) -> dict[str, Any]:
        scalars = scalars or self.scalars()
        return {k: scalars[k] for k in ("loss", "grad_norm", "data_wait")} | {"lr": self._lrs()}

    def breakpoint(self, frame: FrameType | None = None) -> None:
        """Pause here, as asked by the user's code."""
        if not self._active or self._busy or self.paused is not None:
            return
        self._ensure_step()
        self._break("breakpoint()", "stepdbg.breakpoint() was called", phase="breakpoint",
                    actions=["pause"], frame=frame or user_frame(sys._getframe(1)))

    def post_mortem(self, exc: BaseException) -> Break | None:
        """Break on an uncaught exception, if asked to (condition `exception`)."""
        spec = next((c.spec for c in self.conditions if c.kind == "exception"), None)
        if spec is None or isinstance(exc, (SystemExit, KeyboardInterrupt)) or not self._active:
            return None
        tb = exc.__traceback__
        frames = []
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        user = [(f, n) for f, n in frames if user_frame(f) is f]
        frame, lineno = user[-1] if user else (frames[-1] if frames else (None, None))
        details = {
            "exception": type(exc).__name__,
            "message": str(exc),
            "explanation": inspection.explain_error(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "locals": inspection.tensor_locals(frame) if frame is not None else {},
            "module": inspection.failing_module(self._roots.values(), [f for f, _ in frames]),
        }
        self._bwd_depth = 0
        self._depth = 0
        brk = self._break(spec, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                          details=details, phase="exception",
                          actions=[a for a in self.actions if a != "skip"], frame=frame)
        if brk.where and lineno:
            brk.where = where_of(frame, lineno)
        return brk

    def report_stall(self, spec: str, reason: str, details: dict[str, Any]) -> None:
        """Called by the watchdog thread: the main thread cannot pause itself."""
        frame = sys._current_frames().get(self._thread) if self._thread else None
        brk = Break(step=self.step, phase=self._cur.phase if self._cur else "between steps", condition=spec,
                    reason=reason, scalars=self._break_scalars(), where=where_of(user_frame(frame)),
                    details=details)
        self.breaks.append(brk)
        self.report.write("break", **asdict(brk))
        self._say(f"break at step {brk.step} ({brk.phase}) [{spec}]: {reason}")
        if "abort" in self.actions:
            self._say(f"aborting (exit code {EXIT_ABORT}): the job is stalled")
            self.stop(exit_code=EXIT_ABORT)
            # Stuck DataLoader workers would outlive us and hold the terminal's pipes.
            for w in (details.get("dataloader") or {}).get("workers", []):
                with contextlib.suppress(OSError, TypeError):
                    os.kill(w["pid"], 9)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_ABORT)

    # ------------------------------------------------------------------ pausing and controls

    def _emit(self, event: str, data: Any) -> None:
        for listener in list(self.listeners):
            try:
                listener(event, data)
            except Exception as e:  # a listener must never reach the training loop
                self._say(f"event listener failed: {type(e).__name__}: {e}")

    def _pause(self, brk: Break) -> None:
        console = self.frontends == 0 and not self.wait_for_frontend
        if console:
            from .console import can_prompt, run_console

            if not can_prompt():
                self._say("not pausing: no front end is attached and stdin is not a terminal")
                return
        self._resume.clear()
        self._run_mode = ("run", None)
        with self._paused_cv:
            self.paused = brk
            self._paused_cv.notify_all()
        self._emit("paused", brk)
        try:
            if console:
                run_console(self)
            else:
                if self.frontends == 0:
                    self._say(f"paused; waiting for a client: {self.server.attach_command if self.server else ''}")
                self._serve_paused()
        finally:
            with self._paused_cv:
                self.paused = None
                self._paused_cv.notify_all()
            self._progress()
            self._emit("resumed", {"step": self.step})
        if self._end_requested:
            self._say(f"ending the job (exit code {EXIT_ABORT}) as asked by a client")
            raise Abort()

    def _serve_paused(self) -> None:
        # Run requests on the training thread until someone resumes.
        while not self._resume.is_set():
            try:
                fn, fut = self._calls.get(timeout=0.1)
            except queue.Empty:
                alone = self._alone_since
                if (self.detach_timeout is not None and alone is not None and self.frontends == 0
                        and time.monotonic() - alone > self.detach_timeout):
                    self._say(f"no client for {self.detach_timeout:g}s: resuming (--detach-timeout)")
                    self.cont()
                continue
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as e:  # handed back to the caller
                    fut.set_exception(e)
        # Anything left unanswered is cancelled, never silently lost.
        while not self._calls.empty():
            _, fut = self._calls.get_nowait()
            fut.set_exception(NotPaused("the job resumed before this request ran"))

    def on_training_thread(self, fn: Callable[[], Any], timeout: float = 300.0) -> Any:
        """Run `fn` on the paused training thread and return its result."""
        me = threading.current_thread()
        if me.ident == self._thread or (self._thread is None and not me.name.startswith("stepdbg-")):
            return fn()  # the training thread itself (the console), or nothing trains yet
        if self.paused is None:
            raise NotPaused("the job is running; pause it first")
        fut: Future[Any] = Future()
        self._calls.put((fn, fut))
        return fut.result(timeout=timeout)

    def wait_paused(self, timeout: float | None = None, previous: Break | None = None) -> Break | None:
        """Wait until the job is paused at a break other than `previous`; None on timeout."""
        with self._paused_cv:
            self._paused_cv.wait_for(
                lambda: self.paused is not None and self.paused is not previous, timeout=timeout)
            return self.paused if self.paused is not previous else None

    def attach(self) -> None:
        """A front end is attached: pauses wait for it, replay is armed, and a distributed
        job's collectives stop timing out (a paused rank would otherwise kill the job)."""
        self.frontends += 1
        self._alone_since = None
        self.armed = True
        self._guard("ranks", self.ranks.raise_timeout)

    def detach(self, then: str = "stay") -> None:
        """A front end left. `then`: "stay" (a paused job waits for a re-attach),
        "continue" or "end" (the job ends with exit code 3)."""
        self.frontends = max(0, self.frontends - 1)
        if self.frontends == 0:
            self._alone_since = time.monotonic()
            self.armed = "replay" in self.actions
            self._guard("ranks", self.ranks.restore_timeout)
        if then == "continue":
            self.cont()
        elif then == "end":
            self.end()

    def end(self) -> None:
        """End the job: at once if paused, else at the next pause point (exit code 3)."""
        self._end_requested = True
        if self.paused is not None:
            self.cont()
        else:
            self._run_mode = ("phase", None)

    def _resume_with(self, mode: str, arg: Any = None) -> None:
        self._run_mode = (mode, arg)
        self._resume.set()

    def cont(self) -> None:
        """Continue until the next break."""
        self._resume_with("run")

    def pause(self) -> None:
        """Pause at the next pause point."""
        self._run_mode = ("phase", None)

    def next_phase(self) -> None:
        self._resume_with("phase")

    def next_step(self) -> None:
        """Continue to the same pause point of the next step."""
        cur = self.paused
        self._resume_with("step", (self.step + 1, cur.phase if cur else "before_forward"))

    def pause_at(self, n: int) -> None:
        """Pause at step n's before_optimizer_step (outside collectives): what a client
        sends to every rank of a job, with n past every rank's current step."""
        if n < self.step:
            raise ValueError(f"step {n} has passed (the job is at step {self.step})")
        self._run_mode = ("step", (n, "before_optimizer_step"))

    def run_to_step(self, n: int) -> None:
        if n <= self.step:
            raise ValueError(f"step {n} is not ahead (the job is at step {self.step})")
        self._resume_with("to_step", n)

    def _control_stop(self, phase: str) -> str | None:
        mode, arg = self._run_mode
        if mode == "phase":
            return f"paused at the next pause point ({phase})"
        if mode == "step" and self.step >= arg[0] and (phase == arg[1] or arg[1] not in cond_mod.PHASES):
            return f"next step: step {self.step}"
        if mode == "to_step" and self.step >= arg:
            return f"ran to step {self.step}"
        return None

    # ------------------------------------------------------------------ changes

    def set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        """Set the learning rate of one param group (or all); `pin` keeps it set."""
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr >= 0):
            raise ValueError(f"learning rate must be a finite number >= 0, got {lr!r}")
        opts = list(self._optimizers)
        if not opts:
            raise RuntimeError("no optimizer seen yet: there is no learning rate to set")
        changed = []
        for opt in opts:
            for i, g in enumerate(opt.param_groups):
                if group is not None and i != group:
                    continue
                old = tensors.as_float(g["lr"])
                _set_group_lr(g, lr)
                for sched in list(self._schedulers):
                    if getattr(sched, "optimizer", None) is opt and hasattr(sched, "base_lrs") and old:
                        sched.base_lrs[i] = sched.base_lrs[i] * lr / old
                if pin:
                    self._pins[(id(opt), i)] = lr
                else:
                    self._pins.pop((id(opt), i), None)
                changed.append({"group": i, "old": old, "new": lr})
        if not changed:
            raise ValueError(f"no param group {group}")
        return self._log_change("lr", lr=lr, pinned=pin, groups=changed)

    def _apply_pins(self, opt: torch.optim.Optimizer) -> None:
        for i, g in enumerate(opt.param_groups):
            pinned = self._pins.get((id(opt), i))
            if pinned is not None and tensors.as_float(g["lr"]) != pinned:
                _set_group_lr(g, pinned)

    def set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        """Set another hyperparameter (weight_decay, momentum, ...) of a param group."""
        changed = []
        for opt in list(self._optimizers):
            for i, g in enumerate(opt.param_groups):
                if group is not None and i != group:
                    continue
                if key not in g:
                    raise KeyError(f"param group {i} has no {key!r}; it has {sorted(k for k in g if k != 'params')}")
                changed.append({"group": i, "old": g[key], "new": value})
                g[key] = value
        return self._log_change("param_group", key=key, value=value, groups=changed)

    def skip_step(self) -> dict[str, Any]:
        """Do not apply this step's update (the optimizer sees no gradients this once)."""
        st = self._ensure_step()
        if not self._optimizers:
            raise RuntimeError("no optimizer: a manual update cannot be skipped by stepdbg")
        if st.optimizer_stepped:
            raise RuntimeError(f"step {st.index}'s update was already applied")
        st.skip = True
        return self._log_change("skip", target_step=st.index)

    def _hide_grads(self, opt: torch.optim.Optimizer) -> None:
        # Optimizers skip parameters whose .grad is None (state untouched); put them back after.
        self._hidden = [(p, p.grad) for p in _opt_params(opt) if p.grad is not None]
        for p, _ in self._hidden:
            p.grad = None

    def _restore_grads(self) -> None:
        for p, g in self._hidden:
            p.grad = g
        self._hidden = []

    def _log_change(self, what: str, **fields: Any) -> dict[str, Any]:
        rec = {"what": what, "step": self.step, **fields}
        self.changes.append(rec)
        self.report.write("change", **rec)
        self._emit("change", rec)
        self._say(f"change: {what} " + ", ".join(f"{k}={v}" for k, v in fields.items()))
        return rec

    # ------------------------------------------------------------------ inspection (paused)

    def namespace(self) -> dict[str, Any]:
        """Names a user can inspect: the paused frame's locals plus the step's objects."""
        ns: dict[str, Any] = {}
        f = self._paused_frame
        if f is not None:
            ns.update(f.f_globals)
            ns.update(f.f_locals)
        cap = self.capture
        root = cap.get("root")
        ns.update({
            "model": root, "batch": cap.get("batch"), "loss": cap.get("loss"),
            "output": cap.get("output"), "optimizer": next(iter(self._optimizers), None),
        })
        return ns

    def summary(self, name: str) -> dict[str, Any]:
        """Summary of the tensor named by `name` (any expression in the paused frame)."""
        def run() -> dict[str, Any]:
            value = self._eval_expr(name)
            return tensors.summarize(value, name)

        return self.on_training_thread(run)

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        """Values of a tensor at a numpy-style index ('0, :8'), at most `limit` of them."""
        def run() -> list[Any]:
            value = self._eval_expr(name)
            if not isinstance(value, torch.Tensor):
                raise LookupError(f"{name!r} is a {type(value).__name__}, not a tensor")
            return tensors.slice_of(value, index, limit)

        return self.on_training_thread(run)

    def _eval_expr(self, expr: str) -> Any:
        ns = self.namespace()
        try:
            return eval(compile(expr, "<stepdbg>", "eval"), ns, ns)
        except Exception as e:
            raise LookupError(f"cannot evaluate {expr!r}: {type(e).__name__}: {e}") from None

    def evaluate(self, source: str) -> dict[str, Any]:
        """Run an expression or statement in the paused frame; stdout and errors come back as text."""
        def run() -> dict[str, Any]:
            f = self._paused_frame
            g = f.f_globals if f is not None else {}
            loc = self.namespace()
            buf = io.StringIO()
            result: Any = None
            error = None
            self._busy = True
            try:
                with contextlib.redirect_stdout(buf):
                    try:
                        code = compile(source, "<stepdbg>", "eval")
                        result = eval(code, g, loc)
                    except SyntaxError:
                        exec(compile(source, "<stepdbg>", "exec"), g, loc)
            except Exception as e:
                error = _user_traceback(e)
            finally:
                self._busy = False
            if f is not None:
                # Changes to locals are visible to the paused frame where Python allows it.
                for k, v in loc.items():
                    if k in f.f_locals and f.f_locals[k] is not v:
                        with contextlib.suppress(Exception):
                            f.f_locals[k] = v
            return {"output": buf.getvalue(), "value": None if result is None else tensors._short_repr(result, 2000),
                    "error": error}

        return self.on_training_thread(run)

    def module_tree(self) -> list[dict[str, Any]]:
        return self.on_training_thread(lambda: inspection.module_tree(self))

    def model_summary(self, depth: int = 3) -> str | None:
        """torchinfo's summary table on the captured batch."""
        return self.on_training_thread(lambda: inspection.model_summary(self, depth))

    def optimizer_info(self) -> list[dict[str, Any]]:
        return inspection.optimizer_info(list(self._optimizers), list(self._schedulers), self._pins)

    def memory(self) -> dict[str, Any]:
        return inspection.memory()

    def timings(self) -> dict[str, Any]:
        st = self._cur
        return {"current": dict(st.phase_times) if st else {}, "history": [
            {k: h[k] for k in ("step", "step_time", "data_wait")} for h in list(self.history)[-100:]]}

    def source(self, context: int = 5) -> dict[str, Any] | None:
        return inspection.source_around(self._paused_frame, context)

    def stacks(self) -> list[dict[str, Any]]:
        return inspection.thread_stacks()

    def status(self) -> dict[str, Any]:
        st = self._cur
        return {
            "pid": self.pid, "argv": self.argv, "step": self.step,
            "phase": st.phase if st else "between steps",
            "state": "paused" if self.paused else "running",
            "frontends": self.frontends,
            "paused": asdict(self.paused) if self.paused else None,
            "waiting": self._guard("waiting", self.waiting),
            "breaks": [c.spec for c in self.conditions], "actions": self.actions,
        }

    def waiting(self) -> dict[str, Any] | None:
        """Where the training thread waits when it has made no progress for a second (a
        stalled loader, a collective waiting for another rank); in a collective, how long
        it has before the process-group timeout ends the job."""
        if self.paused is not None or self._thread is None:
            return None
        idle = time.monotonic() - self._last_progress
        frame = sys._current_frames().get(self._thread)
        if idle < WAIT_SHOWN_AFTER or frame is None:
            return None
        multi = self.ranks.active()
        out = {"idle_s": round(idle, 1), **inspection.blocked_in(frame, multi), "timeout_s": None, "left_s": None}
        if out["collective"] and multi:
            timeout = self.ranks.timeout_at(self._last_progress)
            if timeout is not None:
                out["timeout_s"], out["left_s"] = timeout, round(max(0.0, timeout - idle), 1)
        return out

    def replay(self) -> dict[str, Any]:
        """Replay the step under anomaly detection and per-module checks; report the producer."""
        from .replay import replay_step

        def run() -> dict[str, Any]:
            self._busy = True
            try:
                result = replay_step(self)
            finally:
                self._busy = False
            self.replays.append(result)
            self.report.write("replay", **result)
            self._emit("replay", result)
            first = result.get("first_nonfinite")
            self._say(f"replay of step {result['step']}: {result['summary']}"
                      + (f"\n  {first['code']}" if first and first.get("code") else ""))
            return result

        return self.on_training_thread(run)

    # ------------------------------------------------------------------ output

    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"stepdbg: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- helpers


def _user_traceback(e: BaseException) -> str:
    """The traceback of an evaluated statement, from its own code on (not stepdbg's)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<stepdbg>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb, chain=False))


def _fmt_nonfinite(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _first_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for v in x:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        for v in x.values():
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _opt_params(opt: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    return [p for g in opt.param_groups for p in g["params"]]


def _set_group_lr(group: dict[str, Any], lr: float) -> None:
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def _caller_kwargs() -> dict[str, Any]:
    # Global forward pre-hooks get args only; the kwargs of the root call live in the
    # frame of Module._call_impl (torch 2.x), two or three frames up.
    try:
        f: FrameType | None = sys._getframe(3)
    except ValueError:
        return {}
    for _ in range(6):
        if f is None:
            break
        if f.f_code.co_name in ("_call_impl", "inner") and "kwargs" in f.f_locals:
            kw = f.f_locals["kwargs"]
            return dict(kw) if isinstance(kw, dict) else {}
        f = f.f_back
    return {}
