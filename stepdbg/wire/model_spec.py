"""`--model MODULE:FACTORY` / `--model FILE.py:FACTORY`, checked as words and paths before
anything is imported: `stepdbg replay` refuses a bad one in its own process, before the
replay's process imports torch (seconds), and the replay checks it again the same way.
Standard library only.
"""

from __future__ import annotations

import os
import re

MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def inside(path: str, directory: str) -> bool:
    """`path` is `directory` or under it (symlinks resolved)."""
    real, top = os.path.realpath(path or "."), os.path.realpath(directory)
    return real == top or real.startswith(top + os.sep)


def spec_error(spec: str, bundle_dir: str) -> str | None:
    """Why `spec` cannot name a model factory for the bundle in `bundle_dir`; None if it may."""
    target, _, name = spec.rpartition(":")
    if not target or not name.replace(".", "").isidentifier():
        return f"--model {spec!r}: expected MODULE:FACTORY or FILE.py:FACTORY"
    if inside(target if target.endswith(".py") else os.getcwd(), bundle_dir):
        return (f"--model {spec!r} names the bundle's own files: a bundle's files are data, never code; "
                "name your model's code outside it")
    if target.endswith(".py"):
        return None if os.path.isfile(target) else (
            f"{target}: no such file (the model's code is needed to rebuild it; give --model MODULE:FACTORY or "
            "--model FILE.py:FACTORY, a function that builds the model)")
    if not MODULE.fullmatch(target):
        return f"--model {spec!r}: {target!r} is not a module name (pkg.module) nor a .py file"
    return None
