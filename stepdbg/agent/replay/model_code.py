"""Where `stepdbg replay` gets the model's code: from the user's own files, never from the
bundle.

A bundle is data (bundle_check.py). Its meta.json records the model's class (module,
qualname), the file that defines it and the training script, but nothing it names is
imported and nothing it ships is run:

- the code comes from the file or module the user names with ``--model``, else from the
  recorded training script: an absolute path outside the bundle, named on stderr before
  it is read;
- a file is loaded as *definitions only*: its imports, classes, functions and constant
  assignments (no call in them), and try/if blocks made of these. None of its other
  top-level statements runs: not the training (at top level, as nanoGPT's train.py, or
  under ``if __name__ == "__main__":``, or in a try block), not a call, not an assignment
  that computes (``_ = open(...).write(...)``);
- without ``--model``, the recorded class is looked up among the script's definitions and
  what its imports bound (never imported by the name the bundle gives), and built with no
  arguments only when it is an ``nn.Module`` subclass. A function is called only when the
  user named it.
"""

from __future__ import annotations

import ast
import os
import stat
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from stepdbg.agent.replay.bundle import BundleError
from stepdbg.wire.fold import for_terminal
from stepdbg.wire.model_spec import inside, spec_error

FACTORY_HINT = "give --model MODULE:FACTORY or --model FILE.py:FACTORY, a function that builds the model"
SOURCE_CAP = 8 << 20  # bytes of a script read at most
_DEFS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _computes(node: ast.AST) -> bool:
    """Whether evaluating `node` could run code: a call, an await, a walrus, or a read of
    __name__ (the training's guard). A lambda's body runs only when called: it is a
    definition (its defaults are not)."""
    if isinstance(node, ast.Lambda):
        return any(_computes(d) for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
    if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return True
    if isinstance(node, ast.Name) and node.id == "__name__":
        return True
    return any(_computes(child) for child in ast.iter_child_nodes(node))


def _names_only(target: ast.AST) -> bool:
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, (ast.Tuple, ast.List)) and all(_names_only(t) for t in target.elts)


def is_definition(node: ast.stmt) -> bool:
    """Whether the top-level statement `node` only defines names."""
    if isinstance(node, _DEFS) or isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):  # a docstring
        return isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Assign):
        return all(_names_only(t) for t in node.targets) and not _computes(node.value)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and (node.value is None or not _computes(node.value))
    if isinstance(node, ast.Try):
        blocks = [node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]]
        return all(is_definition(s) for b in blocks for s in b)
    if isinstance(node, ast.If):
        return not _computes(node.test) and all(is_definition(s) for s in [*node.body, *node.orelse])
    return False


def definitions(file: str, name: str = "stepdbg_replay_model") -> types.ModuleType:
    """The module of `file` with only its definitions run (module docstring)."""
    path = Path(file)
    try:
        if not path.is_file():
            raise BundleError(f"{file}: no such file (the model's code is needed to rebuild it; {FACTORY_HINT})")
        if path.stat().st_size > SOURCE_CAP:
            raise BundleError(f"{file} is over {SOURCE_CAP >> 20} MiB: not a script")
        source = path.read_bytes()
        tree = ast.parse(source, file)
    except (OSError, SyntaxError, ValueError, RecursionError) as e:
        raise BundleError(f"{file}: not Python that can be read ({type(e).__name__}: {e})") from None
    tree.body = [n for n in tree.body if is_definition(n)]
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # a dataclass looks its module up while it is defined
    try:
        exec(compile(tree, str(path), "exec", dont_inherit=True), module.__dict__)
    except (Exception, SystemExit) as e:  # an import that parses the arguments exits: one line, never the replay's end
        raise BundleError(f"{file}: its definitions did not load ({type(e).__name__}: {e})") from None
    return module


def _walk(obj: Any, qualname: str, where: str) -> Any:
    """`qualname` in `obj`, attribute by attribute, never through a module (a class's
    qualified name has none; a module's __getattr__ would import more)."""
    for i, part in enumerate(qualname.split(".")):
        if not part.isidentifier() or (i and isinstance(obj, types.ModuleType)):
            raise BundleError(f"{qualname!r} is not a name in {where}")
        obj = obj.__dict__.get(part) if isinstance(obj, types.ModuleType) else getattr(obj, part, None)
        if obj is None:
            raise BundleError(f"{where} has no {qualname}")
    return obj


def _owned(script: str) -> None:
    """The recorded script (a real path: no link in it) must be the user's own: a regular
    file owned by them, in a folder that is theirs (or root's) and that no other user can
    write into, under folders where no other user can rename what the user owns (writable
    by others only when sticky, as /tmp is). Else anyone could have put
    a file (or a sibling module it imports) where a bundle names it, or swap a folder."""
    me, group = os.getuid(), os.getgid()
    st = os.lstat(script)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != me:
        _not_yours(script, "it is not a file of yours")
    folder = os.lstat(os.path.dirname(script))
    if folder.st_uid not in (me, 0) or folder.st_mode & 0o002 or folder.st_mode & 0o020 and folder.st_gid != group:
        _not_yours(script, "its folder is not yours alone (another user may write into it)")
    parent = os.path.dirname(os.path.dirname(script))
    while True:
        up = os.lstat(parent)
        if up.st_mode & 0o022 and not up.st_mode & stat.S_ISVTX and not (
                up.st_mode & 0o022 == 0o020 and up.st_gid == group):
            _not_yours(script, f"{parent} is not yours alone (another user may rename what it holds)")
        if parent == os.path.dirname(parent):
            return
        parent = os.path.dirname(parent)


def _not_yours(script: str, why: str) -> None:
    raise BundleError(f"the bundle names {script}, and {why}: {FACTORY_HINT} (a file you name is read as "
                      "definitions only)")


def _inside(path: str, directory: Path) -> bool:
    return inside(path, str(directory))


def keep_out(bundle_dir: Path) -> None:
    """Nothing is imported from the bundle's folder: the sys.path entries in it (the
    current directory, when the replay runs there) are dropped."""
    sys.path[:] = [p for p in sys.path if not _inside(p or os.getcwd(), bundle_dir)]


def from_spec(spec: str, bundle_dir: Path) -> tuple[Callable[[], Any], str]:
    """The factory the user named: MODULE:FACTORY (imported as named, from the current
    directory too) or FILE.py:FACTORY (definitions only); never a file of the bundle's."""
    target, _, name = spec.rpartition(":")
    why = spec_error(spec, str(bundle_dir))
    if why:
        raise BundleError(why)
    if not target.endswith(".py"):
        sys.path.insert(0, os.getcwd())  # `python -m` would have: the user's own package here
    if target.endswith(".py"):
        print(for_terminal(f"stepdbg replay: the model's code: the definitions of {os.path.abspath(target)} "
                           "(its top-level statements do not run)", sys.stderr), file=sys.stderr, flush=True)
        return _walk(definitions(target), name, target), spec
    import importlib

    try:
        module = importlib.import_module(target)
    except Exception as e:
        raise BundleError(f"--model {spec!r}: cannot import {target} ({type(e).__name__}: {e})") from None
    return _walk(module, name, target), spec


def recorded_class(model: dict[str, Any], bundle_dir: Path) -> tuple[Callable[[], Any], str]:
    """The model class the bundle records, found in the definitions of the recorded script
    (or in what its imports bound); an nn.Module subclass, else refused."""
    module, qualname, script = model.get("module") or "", model.get("qualname") or "", model.get("script")
    if module.startswith("torch.") or module == "torch":
        raise BundleError(f"the model is torch's {qualname}, built in the script: {FACTORY_HINT}")
    if not script or not os.path.isabs(script):
        raise BundleError(f"the bundle records no training script to read the model's code from: {FACTORY_HINT}")
    script = os.path.realpath(script)  # checked, read and its folder searched by this one path: no link in it
    if _inside(script, bundle_dir):
        raise BundleError(f"the bundle names a script inside itself ({script}); a bundle's files are data, "
                          f"never code: {FACTORY_HINT}")
    if not os.path.isfile(script):
        raise BundleError(f"{script}: no such file (the model's code is needed to rebuild it; {FACTORY_HINT})")
    _owned(script)
    print(for_terminal(f"stepdbg replay: the model's code: the definitions of {script} (its imports, classes and "
                       "functions; its top-level statements do not run)", sys.stderr), file=sys.stderr, flush=True)
    sys.path.insert(0, os.path.dirname(script))  # its sibling modules, as the job found them
    keep_out(bundle_dir)
    ns = definitions(script)
    home = ns if module == "__main__" else sys.modules.get(module)
    if home is None:  # not imported by the script: the bundle's name alone is never imported
        raise BundleError(f"{script} does not import {module}, where the model's class {qualname} was: {FACTORY_HINT}")
    cls = _walk(home, qualname, script if module == "__main__" else module)
    if isinstance(cls, type) and str(getattr(cls, "__module__", "")).startswith("torch."):
        raise BundleError(f"the model is torch's {cls.__name__}, built in the script: {FACTORY_HINT}")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise BundleError(f"{qualname} in {script} is not a torch.nn.Module class: {FACTORY_HINT}")
    return cls, qualname


__all__ = ["FACTORY_HINT", "definitions", "from_spec", "is_definition", "keep_out", "recorded_class"]
