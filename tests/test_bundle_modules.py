"""A bundle records the model's module tree as data (module_tree.py), so `stepdbg replay`
rebuilds a model the script built from torch's own modules (`nn.Sequential(...)`, the norm
of small scripts: it was refused, "give --model MODULE:FACTORY") and a user's module with the
flags the loop had set at the break (a replay built it as its constructor does, and did not
make the NaN). The record is untrusted data: a class outside torch.nn, an attribute that
would replace a method, a module that holds itself, any fuzzed field: one line, nothing run.
(../shared/shapes/check.py: dict_batch_loader and inplace_setitem, offline.)"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from conftest import run_stepdbg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bundle_trust import json_values, replay_here

from stepdbg.agent.replay import bundle, offline

# Torch's modules only, built in main(): a tied Linear used twice, BatchNorm's buffers,
# LayerNorm's tuple, a Dropout's p. At step 2 the loop makes the first layer's weights huge:
# its output overflows, and LayerNorm makes the NaN of inf - inf.
TORCH_ONLY = '''\
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    shared = nn.Linear(16, 16)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), shared, nn.ReLU(), shared,
                          nn.LayerNorm(16), nn.Dropout(0.0), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(4):
        x, y = torch.randn(32, 6), torch.randn(32, 1)
        if step == 2:
            with torch.no_grad():
                model[0].weight.fill_(3e38)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done")


if __name__ == "__main__":
    main()
'''

# inplace_setitem's shape: the loop sets a flag of the model at step 2, and the forward writes a NaN.
FLAGGED = '''\
import torch
from torch import nn


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)
        self.poison = False
        self.trace = ""  # a bundle must not choose it: a path the forward writes to

    def forward(self, x):
        if self.trace:
            open(self.trace, "a").write("traced")
        h = self.fc1(x)
        if self.poison:
            h[0, 7] = float("nan")  # @poison
        return self.fc2(torch.relu(h))


torch.manual_seed(0)
model = Masked()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    model.poison = step == 2
    loss = model(torch.randn(32, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _saved(root: Path, name: str, source: str) -> tuple[dict, Path]:
    """(The live replay of the script's NaN step, the path of its bundle.)"""
    job = root / name
    job.mkdir()
    (job / "train.py").write_text(source)
    run = run_stepdbg(job, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
                      "--on-break", "skip", "--bundle-dir", str(job), script_args=(str(job / "train.py"),))
    assert run.returncode == 0, run.stderr[-2000:]
    (live,) = run.of("replay")[:1]
    return live, Path(next(e for e in run.of("bundle") if e["saved"])["path"])


@pytest.fixture(scope="module")
def torch_only(tmp_path_factory) -> tuple[dict, Path]:
    return _saved(tmp_path_factory.mktemp("jobs"), "torch_only", TORCH_ONLY)


def _answer(replay: dict) -> tuple:
    f = replay["first_nonfinite"] or {}
    return f.get("where"), f.get("op"), f.get("module"), f.get("line"), replay.get("reproduced")


def test_a_model_of_torchs_own_modules_built_in_the_script_replays_from_anywhere(torch_only, tmp_path, capsys,
                                                                                monkeypatch):
    live, path = torch_only
    assert live["first_nonfinite"]["where"] == "forward", live["summary"]
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(path, capsys, "--json")
    assert code == 0, err
    assert "the model: torch's Sequential holding 7 modules, rebuilt from the bundle's record of them" in err, err
    assert "the model's code" not in err  # (the script is not read: there is no class of the user's in it)
    assert _answer(json.loads(out)) == _answer(live), (out, live["summary"])


def test_the_flag_the_loop_set_is_the_one_replayed_offline(tmp_path, capsys, monkeypatch):
    live, path = _saved(tmp_path, "flagged", FLAGGED)
    assert live["first_nonfinite"]["where"] == "forward" and live["reproduced"] is True, live["summary"]
    meta = json.loads((path / "meta.json").read_text())
    assert meta["modules"]["modules"][0]["attrs"]["poison"] is True
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(path, capsys, "--json")
    assert code == 0, err
    assert _answer(json.loads(out)) == _answer(live), out  # before: where None, reproduced false


def test_a_bundle_restores_flags_only_never_a_string_or_number_the_users_code_reads(tmp_path, capsys):
    """The fifth attack: a restored `trace_file` made the user's own forward write where the
    bundle chose, and a restored `repeats = 10**7` looped without end."""
    _, path = _saved(tmp_path, "flagged", FLAGGED)
    written = tmp_path / "written_by_the_bundle"
    tampered = _tree_changed(path, tmp_path, lambda mods: mods[0]["attrs"].update(trace=str(written)))
    code, out, err = replay_here(tampered, capsys, "--json")
    assert code == 0 and json.loads(out)["first_nonfinite"]["where"] == "forward", err  # poison (a bool) restored
    assert not written.exists()


def test_odd_attributes_leave_the_tree_whole_or_out_never_the_bundle():
    import numpy as np
    import torch
    from torch import nn

    from stepdbg.agent.replay import module_tree

    m = nn.Linear(2, 2)
    vars(m)[7] = "seven"  # a key that is not a string: skipped (it turned the bundle hook off)
    m.limit = np.float64(np.inf)  # numpy's repr is np.float64(inf): recorded as inf, read back as inf
    tree = module_tree.record(m)
    back = module_tree.checked(Path("meta.json"), json.loads(json.dumps(tree)))
    assert back["modules"][0]["attrs"]["limit"] == float("inf")
    big = nn.Sequential(*[nn.Linear(1, 1) for _ in range(3)])
    big[0].notes = ["x" * 900] * 60
    assert module_tree.record(big) is not None
    old, module_tree.TREE_CAP = module_tree.TREE_CAP, 10_000  # a tree over the cap of meta.json is left out
    try:
        assert module_tree.record(big) is None
    finally:
        module_tree.TREE_CAP = old
    assert torch.equal(m.weight, m.weight)


def _tree_changed(path: Path, where: Path, change) -> Path:
    dst = where / "b"
    shutil.copytree(path, dst)
    meta = json.loads((dst / "meta.json").read_text())
    change(meta["modules"]["modules"])
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


def _chain(mods: list) -> None:
    """The root holds a chain of 300 Sequentials, the last holding the model's first layer."""
    names = [".".join(f"d{j}" for j in range(i + 1)) for i in range(300)]
    mods[0]["children"] = [["0", names[0]]]
    for i, name in enumerate(names):
        mods.append({**copy.deepcopy(mods[0]), "name": name, "params": {}, "buffers": {}, "transient": [],
                     "children": [["0", names[i + 1]]] if i + 1 < len(names) else []})


def _levels(mods: list, n: int, edges: list) -> None:
    """n levels of Sequentials, each holding the next level's by `edges` (names L<k>a, L<k>b)."""
    base = {**copy.deepcopy(mods[0]), "params": {}, "buffers": {}, "transient": []}
    mods[0]["children"].append(["deep", "L1a"])
    for k in range(1, n + 1):
        for side in "ab":
            nxt = [[key, child.replace("L1", f"L{k + 1}")] for key, child in edges] if k < n else []
            mods.append({**copy.deepcopy(base), "name": f"L{k}{side}", "children": nxt})


def _chain_from_root(mods: list) -> None:
    """c1 -> c2 -> ... -> c300, the root listing every one (first-visit depth was 1)."""
    base = {**copy.deepcopy(mods[0]), "params": {}, "buffers": {}, "transient": []}
    for i in range(1, 301):
        mods.append({**copy.deepcopy(base), "name": f"c{i}", "children": [["0", f"c{i + 1}"]] if i < 300 else []})
    mods[0]["children"] += [[f"c{i}", f"c{i}"] for i in range(300, 0, -1)]


ATTACKS = {
    "a class outside torch.nn": (lambda m: m[1].update(module="posix", qualname="system"), "not one of torch.nn's"),
    "torch.nn's functional module": (lambda m: m[1].update(module="torch.nn", qualname="functional"),
                                     "not one of torch.nn's"),
    "a dotted qualname": (lambda m: m[1].update(qualname="Linear.__init__"), "not one of torch.nn's"),
    "an attribute named forward": (lambda m: m[1]["attrs"].update(forward="x"), "sets forward"),
    "an attribute named as its weight": (lambda m: m[1]["attrs"].update(weight=1), "sets weight"),
    "a module that holds itself": (lambda m: m[0]["children"].append(["9", ""]), "holds itself"),
    "a child not in the tree": (lambda m: m[0]["children"].append(["9", "nowhere"]), "not in the tree"),
    "modules 300 deep": (_chain, "nest deeper than 200"),
    "an object as an attribute": (lambda m: m[1]["attrs"].update(p={"__class__": "os.system"}), "not plain data"),
    "an internal of Module": (lambda m: m[1].update(attrs={**m[1]["attrs"], "_forward_hooks": [1]}), None),
    "2**30 paths through shared modules": (lambda m: _levels(m, 30, [["a", "L1a"], ["b", "L1b"]]),
                                           "more than 200,000 paths"),
    "one child listed 1000 times, 30 levels": (lambda m: _levels(m, 30, [[f"k{i}", "L1a"] for i in range(1000)]),
                                               "more than 200,000 paths"),
    "a chain 300 deep, each listed by the root": (_chain_from_root, "nest deeper than 200"),
    "a padding of 10**9": (lambda m: m.append({**copy.deepcopy(m[4]), "name": "pad", "module":
                                               "torch.nn.modules.padding", "qualname": "ConstantPad1d",
                                               "attrs": {"padding": {"tuple": [0, 10 ** 9]}, "value": 0.0,
                                                         "training": True}, "params": {}, "buffers": {},
                                               "transient": [], "children": []})
                           or m[0]["children"].insert(0, ["pad", "pad"]), "sets padding to 1e+09"),
    "training a string": (lambda m: m[1]["attrs"].update(training="yes"), "training is not true or false"),
    "a dotted child key": (lambda m: m[0]["children"].append(["a.b", "1"]), "by an empty or dotted key"),
    "a child key twice": (lambda m: m[0]["children"].append(list(m[0]["children"][0])), "names a child"),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hand_made_module_tree_is_refused_in_one_line(torch_only, tmp_path, capsys, attack):
    change, words = ATTACKS[attack]
    path = _tree_changed(torch_only[1], tmp_path, change)
    code, out, err = replay_here(path, capsys)
    if words is None:  # (dropped when read: Module's own fields are never taken from a bundle)
        assert code == 0, err
        return
    assert code == 1 and out == "", (out, err)
    (line,) = err.strip().splitlines()[-1:]
    assert words in line and "Traceback" not in err, err


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_module_tree_is_replayed_or_refused_in_one_line(torch_only, tmp_path_factory, data):
    fields = ["name", "module", "qualname", "attrs", "dropped", "params", "buffers", "transient", "children"]

    def change(mods: list) -> None:
        for _ in range(data.draw(st.integers(1, 3))):
            m = mods[data.draw(st.integers(0, len(mods) - 1))]
            field = data.draw(st.sampled_from(fields))
            if data.draw(st.booleans()):
                m.pop(field, None)
            elif isinstance(m.get(field), dict) and m[field] and data.draw(st.booleans()):
                m[field][data.draw(st.sampled_from(sorted(m[field])))] = data.draw(json_values)
            else:
                m[field] = data.draw(json_values)

    path = _tree_changed(torch_only[1], tmp_path_factory.mktemp("fuzz"), change)
    try:
        offline.replay_bundle(path)
    except bundle.BundleError as e:
        assert "\n" not in str(e) and str(e), e


DATA_NAN = '''\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(8, 4)
    if step == 1:
        x[2, 3] = float("nan")
    out = model(x)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_a_bundles_data_nan_is_named_by_the_scripts_variable_offline_too(tmp_path, capsys, monkeypatch):
    """Live said `x` (the paused frame's variable), offline `batch` (stepdbg's word): the
    bundle's line that called the model, `out = model(x)`, names it (the tree attacker's 9)."""
    from stepdbg.agent.measure.frames import only_argument

    live, path = _saved(tmp_path, "data", DATA_NAN)
    assert live["first_nonfinite"]["tensor"] == "x", live["summary"]
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(path, capsys, "--json")
    first = json.loads(out)["first_nonfinite"]
    assert code == 0 and (first["tensor"], first["index"]) == ("x", [2, 3]), (first, err)
    assert only_argument("pred = model(batch['features'])") == "batch['features']"
    assert only_argument("loss = F.mse_loss(model(x), y)") is None and only_argument("model(*xs)") is None
