"""The randomness that made two runs part, in one place for both diffs: the diff at a pause
(stepdbg/agent/diff/twice.py: the TUI's D, the console's diff, the doctor's finding) and
`stepdbg diff`, from its records' step lines (stepdbg/agent/diff/randomness.StepDraws
writes them). Standard library only."""

from __future__ import annotations

from typing import Any

from .step_diff import Record, short_path

KERNEL = "kernel"  # the randomness of an op whose outputs differ from the same inputs (the diff at a pause)


def randomness_of(found: dict[str, Any] | None, draws: list[dict[str, Any]],
                  moved: list[str]) -> list[dict[str, Any]]:
    """What made two runs part: the draws seen inside the module that differs first, else an
    op whose outputs differ from the same inputs (a kernel), else the sources that moved in
    the step."""
    if found is None:
        return []
    if draws:
        return draws
    op = found.get("op")
    if op is not None and op["same_inputs"]:
        return [{"source": KERNEL, "call": f"{op['name']} gave different outputs from the same inputs",
                 **{k: op[k] for k in ("file", "line", "code")}}]
    return [{"source": m, "call": "drawn from during the step"} for m in moved]


def randomness_words(causes: list[dict[str, Any]]) -> str:
    """'randomness: python random: random.gauss at m.py:17; ...', or that none moved."""
    said = [f"{c['source']}: {c['call']}" + (f" at {short_path(c.get('file'))}:{c['line']}" if c.get("line") else "")
            for c in causes]
    return "randomness: " + "; ".join(said) if said else "no randomness found that moved"


def records_randomness(a: Record, b: Record, found: dict[str, Any]) -> list[dict[str, Any]] | None:
    """What two runs' records say of the randomness in the step that differs first (each
    run's step line: its draws, by the module they were made in, the sources that moved,
    each source's state at the step's start); None where a record says nothing of it (a
    bundle's, an older stepdbg's) or the batch differs (drawn before the step, unseen). A
    source whose state was the same in both runs at the step's start drew the same numbers
    in both (a seeded `random`): it is left out."""
    said = [r.step_lines.get(found["step"], {}).get("randomness") for r in (a, b)]
    if said[0] is None or said[1] is None or found.get("phase") == "input":
        return None
    same = {k for k, v in said[0]["states"].items() if v is not None and said[1]["states"].get(k) == v}
    module = found.get("module") or ""

    def inside(d: dict[str, Any]) -> bool:  # (a module's draws: of its forward, or of a module in it)
        return d["source"] not in same and (found.get("phase") != "forward" or not module or d.get("module") == module
                                             or str(d.get("module") or "").startswith(module + "."))

    draws = [d for d in said[0]["draws"] if inside(d)] or [d for d in said[1]["draws"] if inside(d)]
    moved = [m for m in dict.fromkeys([*said[0]["moved"], *said[1]["moved"]]) if m not in same]
    return randomness_of(found, draws, moved)
