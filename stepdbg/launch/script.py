"""Run a training script as `python script.py` itself does, so the program sees the same
names under stepdbg as plain: ``sys.argv[0]`` as typed (``./train.py``, not made absolute:
minGPT writes its argv to args.txt), ``__file__`` and the code's file name as Python
makes them (the current directory joined with the typed path, not normalised), a fresh
``__main__`` module (its loader, no spec), put back when the script ends.

``runpy.run_path`` differs on two of these: it sets ``sys.argv[0]`` to the path it is
given while the script runs, and names the code by that path."""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import sys
import types


def main_file(typed: str) -> str:
    """The name Python gives a script run as `python TYPED` (3.9+: absolute, not normalised)."""
    return typed if os.path.isabs(typed) else os.path.join(os.getcwd(), typed)


def run_script(typed: str) -> None:
    """Run the script `typed` (the path as given) as __main__; raises what the script raises."""
    name = main_file(typed)
    if os.path.isdir(name) or not name.endswith((".py", ".pyw")) and _is_archive(name):
        import runpy  # a directory or a zip with __main__.py: runpy's own handling

        runpy.run_path(name, run_name="__main__")
        return
    with open(name, "rb") as f:
        source = f.read()
    code = compile(source, name, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=name, __cached__=None, __builtins__=builtins, __spec__=None, __package__=None,
                           __loader__=importlib.machinery.SourceFileLoader("__main__", name))
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _is_archive(name: str) -> bool:
    import zipfile

    try:
        return zipfile.is_zipfile(name)
    except OSError:
        return False


__all__ = ["main_file", "run_script"]
