"""The randomness a replay does not put back, and which of it a step draws from.

A replay restores torch's own generators (CPU and CUDA) to the step's start. Everything
else a step may draw from moves each time it runs: Python's ``random``, numpy's global
RNG, a numpy Generator or a ``torch.Generator`` the model holds, fresh entropy from the
OS (an unseeded ``np.random.default_rng()``, ``random.SystemRandom``). ``Others`` saves
what it can find of these before a diff at a pause runs the step, says which moved, and
puts them back afterwards, so that the job draws what it would have drawn.

``Draws`` is the close look inside one module: between each of its ops (``Draws.check``)
it notices the global RNGs that moved, and a profiler (this thread only, while the module
runs) notices calls into Python's ``random`` and the OS's entropy, with the user's line.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure.frames import is_own_file, user_frame, where_of

PYTHON, NUMPY, TORCH_GEN, OS_ENTROPY = ("python random", "numpy", "torch generator", "OS entropy")
MAX_HELD = 64  # RNG objects looked for in the model's modules' attributes
_RANDOM_FILE = os.path.abspath(random.__file__)


def _numpy() -> Any:
    return sys.modules.get("numpy")  # (never imported here: a job without numpy draws nothing from it)


def numpy_global() -> Any:
    """A comparable copy of numpy's global RNG state, or None without numpy."""
    np = _numpy()
    if np is None:
        return None
    name, key, pos, has_gauss, cached = np.random.get_state()
    return (name, key.tobytes(), pos, has_gauss, cached)


def held_rngs(root: torch.nn.Module) -> list[tuple[str, Any]]:
    """numpy Generators / RandomStates and torch Generators held as attributes of the
    model's modules (self.rng = np.random.default_rng()), by the name the user knows."""
    np = _numpy()
    kinds: tuple[type, ...] = (torch.Generator,)
    if np is not None:
        kinds += (np.random.Generator, np.random.RandomState)
    found: list[tuple[str, Any]] = []
    for name, m in root.named_modules():
        for attr, v in vars(m).items():
            if isinstance(v, kinds) and all(v is not w for _, w in found):
                found.append((f"{name}.{attr}" if name else attr, v))
                if len(found) >= MAX_HELD:
                    return found
    return found


def get_state(rng: Any) -> Any:
    if isinstance(rng, torch.Generator):
        return rng.get_state()
    if hasattr(rng, "bit_generator"):
        return rng.bit_generator.state
    return rng.get_state()


def set_state(rng: Any, state: Any) -> None:
    if isinstance(rng, torch.Generator):
        rng.set_state(state)
    elif hasattr(rng, "bit_generator"):
        rng.bit_generator.state = state
    else:
        rng.set_state(state)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return repr(a) == repr(b)  # (numpy states hold arrays: == is elementwise)


class Others:
    """The RNG states a replay does not restore: saved, compared, put back."""

    def __init__(self, root: torch.nn.Module) -> None:
        self.held = held_rngs(root)
        self.generators: dict[int, tuple[torch.Generator, Any]] = {}  # seen in ops: state at first sight
        self.saved = self._now()

    def _now(self) -> dict[str, Any]:
        np = _numpy()
        return {PYTHON: random.getstate(), NUMPY: np.random.get_state() if np is not None else None,
                "held": [get_state(r) for _, r in self.held]}

    def saw_generator(self, g: torch.Generator) -> None:
        """An op drew from `g` (not torch's default generator, which replay restores)."""
        if id(g) not in self.generators:
            self.generators[id(g)] = (g, g.get_state())

    def moved(self) -> list[str]:
        """The sources whose state is not what it was when saved."""
        now = self._now()
        out = [k for k in (PYTHON, NUMPY) if not _same(now[k], self.saved[k])]
        out += [f"{name} ({type(r).__name__})" for (name, r), a, b in zip(self.held, self.saved["held"], now["held"],
                                                                           strict=True) if not _same(a, b)]
        out += [f"a torch.Generator (seed {g.initial_seed()})" for g, s in self.generators.values()
                if not _same(g.get_state(), s) and all(g is not r for _, r in self.held)]
        return out

    def rewind(self) -> None:
        """Every state as saved: the job draws what it would have drawn without the diff."""
        random.setstate(self.saved[PYTHON])
        np = _numpy()
        if np is not None and self.saved[NUMPY] is not None:
            np.random.set_state(self.saved[NUMPY])
        for (_, r), s in zip(self.held, self.saved["held"], strict=True):
            set_state(r, s)
        for g, s in self.generators.values():
            g.set_state(s)


def _digest(state: Any) -> str:
    """A short fingerprint of an RNG's state: two runs whose states match draw the same."""
    if isinstance(state, torch.Tensor):
        data = state.cpu().numpy().tobytes()
    else:
        data = repr(tuple(s.tobytes() if hasattr(s, "tobytes") else s for s in state)
                    if isinstance(state, tuple) else state).encode()
    return hashlib.sha256(data).hexdigest()[:16]


class StepDraws:
    """`stepdbg diff`'s look at the randomness of one recorded step (recorder.py): the draws
    the step makes (Draws, from the step's first forward to its end), each by the module call
    it was made in (the innermost: `enter` and `leave` are the module hooks'), the sources
    whose state moved (Others), and each source's state at the step's start (a digest: two
    runs that started a step from the same state drew the same). Nothing is put back: the
    job draws what it draws."""

    def __init__(self, root: torch.nn.Module) -> None:
        self.others = Others(root)
        self.states = {PYTHON: _digest(self.others.saved[PYTHON])}
        if self.others.saved[NUMPY] is not None:
            self.states[NUMPY] = _digest(self.others.saved[NUMPY])
        for (name, r), state in zip(self.others.held, self.others.saved["held"], strict=True):
            self.states[f"{name} ({type(r).__name__})"] = _digest(state)
        self.draws = Draws()
        self._open: list[int] = []  # where each running module call's draws begin in draws.found
        self.draws.start()

    def enter(self) -> None:
        self.draws.check(sys._getframe(1))
        self._open.append(len(self.draws.found))

    def leave(self, name: str) -> None:
        self.draws.check(sys._getframe(1))
        for d in self.draws.found[self._open.pop() if self._open else 0:]:
            d.setdefault("module", name)

    def finish(self) -> dict[str, Any]:
        """The step's randomness, as its record's step line holds it (stepdbg/wire/step_diff.py)."""
        self.draws.stop()
        return {"draws": self.draws.found, "moved": self.others.moved(), "states": self.states}


class Draws:
    """Where, inside one module, the step drew randomness a replay does not put back."""

    def __init__(self) -> None:
        self.found: list[dict[str, Any]] = []
        self._last = (None, None)
        self._old_profile: Any = None

    def start(self) -> None:
        self._last = (random.getstate(), numpy_global())
        self._old_profile = sys.getprofile()
        sys.setprofile(self._profile)

    def stop(self) -> None:
        self.check(None)
        sys.setprofile(self._old_profile)

    def check(self, frame: FrameType | None) -> None:
        """Before an op (at `frame`'s line) and at the module's end (None): a global RNG
        that moved since the last look was drawn from in between."""
        now = (random.getstate(), numpy_global())
        if now[1] != self._last[1]:
            self.note(NUMPY, "numpy's global RNG (np.random.*)", frame)
        if now[0] != self._last[0] and not any(d["source"] == PYTHON for d in self.found):
            self.note(PYTHON, "Python's random", frame)
        self._last = now

    def note(self, source: str, call: str, frame: FrameType | None) -> None:
        where = where_of(user_frame(frame)) if frame is not None else None
        d = {"source": source, "call": call, **({k: where[k] for k in ("file", "line", "code")} if where else {})}
        if all((x["source"], x.get("line"), x.get("file")) != (source, d.get("line"), d.get("file"))
               for x in self.found):
            self.found.append(d)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        try:
            if event == "call" and frame.f_code.co_filename == _RANDOM_FILE:
                caller = frame.f_back
                if caller is None or caller.f_code.co_filename == _RANDOM_FILE \
                        or is_own_file(caller.f_code.co_filename):  # (Draws.check's own look)
                    return
                if isinstance(frame.f_locals.get("self"), random.SystemRandom):
                    # numpy seeds an unseeded Generator from here (secrets.randbits), called from
                    # compiled code that leaves no frame: the user's line says whose it is.
                    code = (where_of(user_frame(caller)) or {}).get("code", "")
                    ours = any(w in code for w in ("default_rng", "np.", "numpy"))
                    self.note(NUMPY if ours else OS_ENTROPY, "an unseeded numpy Generator (fresh OS entropy)"
                              if ours else f"random.SystemRandom.{frame.f_code.co_name} (OS entropy)", caller)
                else:
                    self.note(PYTHON, f"random.{frame.f_code.co_name}", caller)
            elif event == "c_call" and isinstance(getattr(arg, "__self__", None), random.Random) \
                    and not isinstance(arg.__self__, random.SystemRandom) \
                    and frame.f_code.co_filename != _RANDOM_FILE and not is_own_file(frame.f_code.co_filename):
                self.note(PYTHON, f"random.{arg.__name__}", frame)
        except Exception:  # noqa: BLE001 - a profiler that raises would be turned off by Python
            pass
