"""The model's module tree in a bundle, as data: what `stepdbg replay` needs of the model
beyond its parameters and buffers, without the model's code.

A state_dict holds tensors only. A model built in the script from torch's own modules
(``nn.Sequential(nn.Linear(10, 32), nn.ReLU(), ...)``, the norm of small scripts) has no
class of its own to rebuild it from, and a module's plain attributes change its forward
(a ``poison`` flag the loop sets at step 6, ``training``, a dropout's ``p``). So meta.json
records, for each module: its class (module, qualname), its plain attributes (None, bool,
int, float, str, and lists and tuples of these: no object, no function), which parameters
and buffers it holds (by the qualified name the bundle's tensors have) and its children.

Rebuilding reads it as untrusted data (``checked``): every field's type, size and depth is
checked; a class is taken only from ``torch.nn``'s own names (never imported by the name
the bundle gives); an instance is made as unpickling makes one (``__new__``, then
Module's ``__init__``, then the attributes), so no constructor or other code runs. A model
of the user's own classes is built from the user's code (model_code.py) and gets its
recorded plain attributes back where it has one of the same name and type (``restore``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch

from stepdbg.agent.replay.bundle_check import BundleError

MAX_MODULES = 20_000  # a model with more is recorded without its tree
TREE_CAP = 6 << 20  # bytes of the tree, about (meta.json is read up to 16 MiB): a larger one is left out
MAX_ATTRS = 64  # plain attributes recorded of one module
MAX_ITEMS = 64  # items of a recorded list or tuple
MAX_TEXT = 1_000  # characters of a recorded string
MAX_NAME = 8_192  # characters of a module's qualified name (200 deep)
DEPTH = 3  # nesting of recorded lists and tuples
MAX_DEPTH = 200  # nesting of modules
MAX_PATHS = 200_000  # paths from the root to every module, shared ones counted on each path
_INTERNAL = frozenset(vars(torch.nn.Module())) - {"training"}  # Module.__init__'s own (hooks, _parameters, ...)


def _encoded(value: Any, depth: int = 0) -> Any:
    """`value` as JSON holds it, or a ValueError when it is not plain data."""
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise ValueError("a string too long to keep")
        return value
    if isinstance(value, int):
        if abs(value) >= 2 ** 63:
            raise ValueError("an int too large to keep")
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"float": repr(float(value))}  # (numpy's: np.float64(inf))
    if isinstance(value, (list, tuple)) and depth < DEPTH and len(value) <= MAX_ITEMS:
        items = [_encoded(v, depth + 1) for v in value]
        return {"tuple": items} if isinstance(value, tuple) else items
    raise ValueError(f"a {type(value).__name__}")


def record(root: torch.nn.Module) -> dict[str, Any] | None:
    """The tree of `root`, or None when it is too large. Each module's attributes that are
    not plain data are named in its "dropped" (a function, an object)."""
    names: dict[int, str] = {}
    found: list[tuple[str, torch.nn.Module]] = []
    for name, m in root.named_modules():  # (each module once, by its first name)
        if len(found) >= MAX_MODULES:
            return None
        names[id(m)] = name
        found.append((name, m))
    params = {id(p): n for n, p in root.named_parameters()}
    buffers = {id(b): n for n, b in root.named_buffers()}
    modules, size = [], 0
    for name, m in found:
        attrs, dropped = {}, []
        for key, value in vars(m).items():
            if not isinstance(key, str) or key in _INTERNAL or key.startswith("__") or not key.isidentifier():
                continue
            try:
                if len(attrs) >= MAX_ATTRS:
                    raise ValueError("one attribute more than a bundle keeps")
                attrs[key] = _encoded(value)
            except ValueError:
                dropped.append(key)
        cls = type(m)
        size += 200 + sum(len(k) + len(str(v)) for k, v in attrs.items())
        if size > TREE_CAP:
            return None
        modules.append({
            "name": name, "module": cls.__module__, "qualname": cls.__qualname__, "attrs": attrs,
            "dropped": dropped[:MAX_ATTRS],
            "params": {k: None if p is None else {"name": params.get(id(p)), "requires_grad": p.requires_grad}
                       for k, p in m._parameters.items()},
            "buffers": {k: None if b is None else buffers.get(id(b)) for k, b in m._buffers.items()},
            "transient": sorted(m._non_persistent_buffers_set),
            "children": [[k, None if c is None else names.get(id(c))] for k, c in m._modules.items()],
        })
    return {"modules": modules}


def _bad(path: Path, what: str) -> BundleError:
    return BundleError(f"{path}: modules{what} (a damaged or hand-made bundle)")


def _text(value: Any, path: Path, what: str, optional: bool = False) -> Any:
    if optional and value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME or not value.isprintable():
        raise _bad(path, f"{what} is not a name")
    return value


def _decoded(value: Any, path: Path, what: str, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str) and len(value) > MAX_TEXT or isinstance(value, int) and abs(value) >= 2 ** 63:
            raise _bad(path, f"{what} is too large")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, dict) and set(value) == {"float"} and value["float"] in ("nan", "inf", "-inf"):
        return float(value["float"])
    tup = isinstance(value, dict) and set(value) == {"tuple"}
    items = value["tuple"] if tup else value
    if isinstance(items, list) and len(items) <= MAX_ITEMS and depth < DEPTH:
        out = [_decoded(v, path, what, depth + 1) for v in items]
        return tuple(out) if tup else out
    raise _bad(path, f"{what} is not plain data")


def _key(k: Any, attribute: bool) -> bool:
    """An attribute's name; a parameter's or buffer's key (a ParameterList's are "0", "1")."""
    if not isinstance(k, str) or k.startswith("__"):
        return False
    return k.isidentifier() if attribute else 0 < len(k) <= 200 and k.isprintable() and "." not in k


def _name_map(value: Any, path: Path, what: str, attribute: bool = False) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > MAX_ATTRS * 4 or not all(_key(k, attribute) for k in value):
        raise _bad(path, f"{what} is not an object of named fields")
    return value


def _entry(path: Path, at: str, m: Any) -> dict[str, Any]:
    """One module's record, checked."""
    if not isinstance(m, dict):
        raise _bad(path, f"{at} is not an object")
    attrs = {k: _decoded(v, path, f"{at}.attrs.{k}")
             for k, v in _name_map(m.get("attrs", {}), path, f"{at}.attrs", True).items() if k not in _INTERNAL}
    dropped = m.get("dropped", [])
    if not isinstance(dropped, list) or len(dropped) > MAX_ATTRS or not all(_key(k, True) for k in dropped):
        raise _bad(path, f"{at}.dropped is not a list of attribute names")
    params = {}
    for k, p in _name_map(m.get("params", {}), path, f"{at}.params").items():
        if p is not None and not (isinstance(p, dict) and isinstance(p.get("requires_grad"), bool)):
            raise _bad(path, f"{at}.params.{k} is not a parameter's record")
        params[k] = None if p is None else {"name": _text(p.get("name"), path, f"{at}.params.{k}"),
                                            "requires_grad": p["requires_grad"]}
    buffers = {k: _text(b, path, f"{at}.buffers.{k}", True)
               for k, b in _name_map(m.get("buffers", {}), path, f"{at}.buffers").items()}
    transient, children = m.get("transient", []), m.get("children", [])
    if not isinstance(transient, list) or not all(isinstance(t, str) and t in buffers for t in transient):
        raise _bad(path, f"{at}.transient is not a list of its buffers")
    if not isinstance(children, list) or len(children) > MAX_MODULES or not all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and c[0].isprintable()
            and (c[1] is None or isinstance(c[1], str)) for c in children):
        raise _bad(path, f"{at}.children is not a list of [key, module] pairs")
    keys = [c[0] for c in children] + list(params) + list(buffers)
    if len(set(keys)) != len(keys) or not all(_key(k, False) for k in keys):
        raise _bad(path, f"{at} names a child, a parameter or a buffer twice, or by an empty or dotted key")
    if not isinstance(attrs.get("training", True), bool):
        raise _bad(path, f"{at}.attrs.training is not true or false")
    return {"name": _text(m.get("name"), path, f"{at}.name"), "module": _text(m.get("module"), path, f"{at}.module"),
            "qualname": _text(m.get("qualname"), path, f"{at}.qualname"), "attrs": attrs, "dropped": dropped,
            "params": params, "buffers": buffers, "transient": transient, "children": children}


def checked(path: Path, tree: Any) -> dict[str, Any] | None:
    """meta.json's "modules" (`record`'s tree, or null), every field checked."""
    if tree is None:
        return None
    if not isinstance(tree, dict) or not isinstance(tree.get("modules"), list) or \
            not 0 < len(tree["modules"]) <= MAX_MODULES:
        raise _bad(path, " is not a module tree")
    out = [_entry(path, f"[{i}]", m) for i, m in enumerate(tree["modules"])]
    if out[0]["name"] != "" or len({m["name"] for m in out}) != len(out):
        raise _bad(path, " does not start at the model's root, each module once")
    _acyclic(path, {m["name"]: [c for _, c in m["children"] if c is not None] for m in out})
    return {"modules": out}


def _acyclic(path: Path, children: dict[str, list[str]]) -> None:
    """Every child is a module of the tree; none is its own ancestor (a model that holds
    itself recurses for ever); the longest path from the root is at most MAX_DEPTH (torch
    walks the tree by recursion); and the paths from the root, which torch walks one by one
    (``named_modules(remove_duplicate=False)``, ``.to()``), are at most MAX_PATHS: a few KB
    of modules that each hold the next level twice make 2**30 of them."""
    order: list[str] = []  # children before their parents
    state: dict[str, int] = {}  # 1: on the path from the root, 2: done
    todo: list[tuple[str, int]] = [("", 0)]  # (module, next child)
    while todo:
        name, i = todo.pop()
        kids = children.get(name)
        if kids is None:
            raise _bad(path, f": a child {name!r} that is not in the tree")
        state[name] = 1
        if i < len(kids):
            todo.append((name, i + 1))
            if state.get(kids[i]) == 1:
                raise _bad(path, f": module {kids[i] or '(root)'} holds itself")
            if kids[i] not in state:
                todo.append((kids[i], 0))
        else:
            state[name] = 2
            order.append(name)
    depth: dict[str, int] = {}
    paths: dict[str, int] = {}
    for name in order:  # (leaves first)
        depth[name] = 1 + max((depth[k] for k in children[name]), default=0)
        paths[name] = 1 + sum(paths[k] for k in children[name])
        if depth[name] > MAX_DEPTH:
            raise _bad(path, f" nest deeper than {MAX_DEPTH}")
        if paths[name] > MAX_PATHS:
            raise _bad(path, f" are reached by more than {MAX_PATHS:,} paths (a module held many times over)")


def torch_class(module: str, qualname: str) -> type | None:
    """torch.nn's own module class that `module`.`qualname` names, else None. Looked up
    among torch.nn's names; nothing the bundle names is imported."""
    if not qualname.isidentifier():
        return None
    home = sys.modules.get(module) if module.startswith("torch.nn.modules.") else None  # (never imported here)
    for cls in (getattr(torch.nn, qualname, None), getattr(home, qualname, None)):  # (MultiheadAttention's out_proj)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == module:
            return cls
    return None


def _made(m: dict[str, Any], params: dict[str, torch.Tensor], buffers: dict[str, Any],
          shared: dict[str, torch.nn.Parameter], hint: str) -> torch.nn.Module:
    """One module of torch.nn's own class, as unpickling makes one: no constructor runs."""
    where = m["name"] or "(root)"
    cls = torch_class(m["module"], m["qualname"])
    if cls is None:
        raise BundleError(f"the model's module {where} is a {m['qualname']} of {m['module']}, not one of "
                          f"torch.nn's: its code is needed: {hint}")
    if m["dropped"]:
        raise BundleError(f"the model's module {where} ({m['qualname']}) holds {', '.join(m['dropped'][:3])}, "
                          f"not plain data a bundle keeps: {hint}")
    taken = [k for k in m["attrs"] if k in m["params"] or k in m["buffers"] or k in dict(m["children"])
             or hasattr(cls, k)]  # (an attribute named forward would be called as the forward)
    if taken:
        raise BundleError(f"the bundle's record of module {where} sets {taken[0]}, a name its class or its "
                          "tensors have (a damaged or hand-made bundle)")
    obj = cls.__new__(cls)
    torch.nn.Module.__init__(obj)
    vars(obj).update(m["attrs"])
    for key, p in m["params"].items():
        if p is not None and p["name"] not in params:
            raise BundleError(f"the bundle holds no parameter {p['name']} for module {where}")
        if p is not None and p["name"] not in shared:  # (a tied weight: one Parameter, as in the job)
            shared[p["name"]] = torch.nn.Parameter(params[p["name"]].clone(), requires_grad=p["requires_grad"])
        obj.register_parameter(key, None if p is None else shared[p["name"]])
    for key, b in m["buffers"].items():
        value = buffers.get(b) if b is not None else None
        obj.register_buffer(key, value.clone() if isinstance(value, torch.Tensor) else None,
                            persistent=key not in m["transient"])
    return obj


def _sized(m: dict[str, Any], bound: int) -> None:
    """A size in a module's attributes (a padding, an output size, a scale) is at most the
    largest dimension of the bundle's tensors (or 65,536): a few bytes of meta.json would
    otherwise make the replay allocate without end (ConstantPad1d's padding of 10**9)."""
    todo = list(m["attrs"].items())
    while todo:
        key, v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend((key, x) for x in v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) > bound:
            raise BundleError(f"the bundle's record of module {m['name'] or '(root)'} sets {key} to {v:g}, more than "
                              f"any size of the bundle's tensors ({bound:,}; a damaged or hand-made bundle)")


def build(tree: dict[str, Any], params: dict[str, torch.Tensor], buffers: dict[str, Any], hint: str) -> torch.nn.Module:
    """The model of torch.nn's own modules that `tree` records, with the bundle's tensors.
    A module of another class, or one holding more than plain data: a BundleError that says
    so and gives `hint`."""
    shared: dict[str, torch.nn.Parameter] = {}
    bound = max([65_536] + [d for t in [*params.values(), *buffers.values()] if isinstance(t, torch.Tensor)
                            for d in t.shape])
    for m in tree["modules"]:
        _sized(m, bound)
    made = {m["name"]: _made(m, params, buffers, shared, hint) for m in tree["modules"]}
    for m in tree["modules"]:
        for key, child in m["children"]:
            if child is not None and child not in made:
                raise BundleError(f"module {m['name'] or '(root)'}'s child {key} is not in the bundle's tree")
            made[m["name"]]._modules[key] = None if child is None else made[child]
    return made[""]


def restore(model: torch.nn.Module, tree: dict[str, Any] | None) -> None:
    """The recorded flags back on the modules of `model` (built from the user's code) that
    have a bool of the same name: the state at the break (a flag the loop set, ``training``),
    not the constructor's. Only bools: a string or a number would let the bundle choose a
    path or a loop count in the user's code (a trace file, a repeat count)."""
    if tree is None:
        return
    by_name = {m["name"]: m for m in tree["modules"]}
    for name, module in model.named_modules():
        rec = by_name.get(name)
        if rec is None or rec["qualname"] != type(module).__qualname__:
            continue
        mine = vars(module)
        for key, value in rec["attrs"].items():
            if key in mine and type(mine[key]) is bool and type(value) is bool:
                mine[key] = value
