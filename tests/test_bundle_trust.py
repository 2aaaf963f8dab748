"""A bundle is data: `stepdbg replay` of a bundle from someone else imports nothing it names
or ships, runs none of the training script's top-level statements, and answers anything
malformed with one line; a save is private and atomic, whatever ends it (issue 43)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import WAIT, run_stepdbg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepdbg.agent.replay import bundle, offline

# nanoGPT's shape: a script that trains at its top level, no `if __name__ == "__main__":`,
# and writes a checkpoint at the end. A replay must rebuild Net from it and run none of it.
TOP_LEVEL = '''\
import os
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.log(self.fc(x).abs()))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    x = torch.randn(16, 4)
    if step == 2:
        x = x * 0.0  # a zero batch: log(|fc bias|) finite, fine; the NaN comes below
        x[0, 0] = float("nan")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.save(model.state_dict(), os.path.join(HERE, "ckpt.pt"))
print("done")
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, Path]:
    """(the job's folder, holding train.py and its ckpt.pt; the bundle of its NaN step)."""
    job = tmp_path_factory.mktemp("job")
    (job / "train.py").write_text(TOP_LEVEL)
    run = run_stepdbg(job, "--no-tui", "--break", "nan", "--on-break", "save", "--on-break", "skip",
                      "--bundle-dir", str(job), script_args=(str(job / "train.py"),))
    assert run.returncode == 0 and "done" in run.stdout, run.stderr[-2000:]
    (event,) = [e for e in run.of("bundle") if e["saved"]][:1]
    return job, Path(event["path"])


def copy_of(saved: tuple[Path, Path], where: Path, **meta_changes: object) -> Path:
    """A copy of the saved bundle under `where`, its meta.json changed as given."""
    _, src = saved
    dst = where / src.name
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    for key, value in meta_changes.items():
        if key.startswith("model_"):
            meta["model"][key.removeprefix("model_")] = value
        else:
            meta[key] = value
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


def replay_here(path: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = offline.main([*args, str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


def files_of(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if p.is_file()}


def test_a_bundle_is_private(saved):
    _, path = saved
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert {stat.S_IMODE((path / f).stat().st_mode) for f in ("meta.json", "tensors.pt")} == {0o600}
    assert not [p for p in path.parent.iterdir() if ".partial-" in p.name]


def test_a_top_level_script_is_read_for_its_definitions_and_none_of_its_training_runs(saved, tmp_path, capsys,
                                                                                      monkeypatch):
    job, path = saved
    before = files_of(job)
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(path, capsys, "--json")
    assert code == 0, err
    assert err.strip() == (f"stepdbg replay: the model's code: the definitions of {job / 'train.py'} (its imports, "
                           "classes and functions; its top-level statements do not run)")
    assert json.loads(out)["first_nonfinite"] is not None
    assert files_of(job) == before and list(tmp_path.iterdir()) == []  # no checkpoint written, nothing made


EVIL = "open({marker!r}, 'w').write('ran')\nimport torch\nclass Net(torch.nn.Module):\n    pass\n"


@pytest.mark.parametrize("attack", ["module shipped in the bundle", "relative script", "script inside the bundle",
                                    "stdlib callable", "stdlib class", "bundle as the current directory"])
def test_a_bundle_names_and_ships_no_code_that_runs(saved, tmp_path, capsys, monkeypatch, attack):
    marker = tmp_path / "ran"
    where = tmp_path / "from-someone"
    where.mkdir()
    changes = {
        "module shipped in the bundle": {"model_module": "evil", "model_qualname": "Net"},
        "relative script": {"model_script": "evil.py", "model_module": "__main__"},
        "script inside the bundle": {"model_script": str(where / saved[1].name / "evil.py"), "model_module": "__main__"},
        "stdlib callable": {"model_module": "os", "model_qualname": "getcwd"},
        "stdlib class": {"model_module": "subprocess", "model_qualname": "Popen"},
        "bundle as the current directory": {"model_module": "evil", "model_qualname": "Net"},
    }[attack]
    path = copy_of(saved, where, **changes)
    (path / "evil.py").write_text(EVIL.format(marker=str(marker)))
    if attack in ("relative script", "bundle as the current directory"):
        monkeypatch.chdir(path)
        monkeypatch.syspath_prepend(str(path))  # as `python -m` puts the current directory first
    code, out, err = replay_here(path, capsys)
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith("stepdbg replay: ") and "--model" in err.splitlines()[-1], err
    assert not marker.exists() and "evil" not in sys.modules


@pytest.mark.parametrize("top", [
    "_ = open({marker!r}, 'w').write('ran')",
    "try:\n    open({marker!r}, 'w').write('ran')\nexcept KeyboardInterrupt:\n    pass",
    "if __name__ == '__main__':\n    open({marker!r}, 'w').write('ran')",
    "with open({marker!r}, 'w') as f:\n    f.write('ran')",
    "PATHS = [open({marker!r}, 'w')]",
])
def test_a_scripts_top_level_statements_never_run_in_a_replay(saved, tmp_path, capsys, monkeypatch, top):
    """The recorded script, changed since: whatever its top level does, only its definitions load."""
    job, _ = saved
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(TOP_LEVEL.replace("torch.manual_seed(0)\n", top.format(marker=str(marker)) + "\n", 1))
    path = copy_of(saved, tmp_path, model_script=str(script))
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(path, capsys)
    assert code == 0 and "replay of step 2" in out, err
    assert not marker.exists() and not (tmp_path / "ckpt.pt").exists()


def meta_of(saved: tuple[Path, Path]) -> dict:
    return json.loads((saved[1] / "meta.json").read_text())


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_meta_json_is_replayed_or_refused_in_one_line(saved, tmp_path_factory, data):
    meta = meta_of(saved)
    keys = sorted(meta) + [f"model.{k}" for k in sorted(meta["model"])] + [f"break.{k}" for k in sorted(meta["break"])]
    for key in data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3)):
        holder, _, name = key.rpartition(".")
        target = meta.get(holder) if holder else meta
        if not isinstance(target, dict):
            continue
        if data.draw(st.booleans()):
            target.pop(name, None)
        else:
            target[name] = data.draw(json_values)
    path = tmp_path_factory.mktemp("fuzz") / "b"
    shutil.copytree(saved[1], path)
    (path / "meta.json").write_text(json.dumps(meta))
    try:
        offline.replay_bundle(path)
    except bundle.BundleError as e:
        assert "\n" not in str(e) and str(e), e


@pytest.mark.parametrize("damage", ["nested 100k deep", "not UTF-8", "3 GB sparse", "link to /dev/zero", "a FIFO",
                                    "empty", "a list", "truncated tensors", "foreign pickle", "tensors of strings",
                                    "tensors.pt a directory", "bogus device", "kernels name torch.load"])
def test_a_damaged_bundle_is_one_line_and_exit_1(saved, tmp_path, damage, capsys):
    path = tmp_path / "b"
    shutil.copytree(saved[1], path)
    meta, tensors = path / "meta.json", path / "tensors.pt"
    good = json.loads(meta.read_text())
    if damage == "nested 100k deep":
        meta.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "not UTF-8":
        meta.write_bytes(b'{"format": 1, "step": "\xff\xfe"}')
    elif damage == "3 GB sparse":
        meta.unlink()
        with open(meta, "wb") as f:
            f.truncate(3 << 30)
    elif damage == "link to /dev/zero":
        meta.unlink()
        meta.symlink_to("/dev/zero")
    elif damage == "a FIFO":
        meta.unlink()
        os.mkfifo(meta)
    elif damage == "empty":
        meta.write_text("")
    elif damage == "a list":
        meta.write_text("[1, 2]")
    elif damage == "truncated tensors":
        tensors.write_bytes(tensors.read_bytes()[: tensors.stat().st_size // 2])
    elif damage == "foreign pickle":
        import pickle

        tensors.write_bytes(pickle.dumps({"parameters": os.getcwd}))
    elif damage == "tensors of strings":
        tensors.unlink()
        torch.save({"parameters": {"fc.weight": "x"}, "rng": {"cpu": None}}, tensors)
    elif damage == "tensors.pt a directory":
        tensors.unlink()
        tensors.mkdir()
    elif damage == "bogus device":
        meta.write_text(json.dumps({**good, "device": "bogus"}))
    elif damage == "kernels name torch.load":
        meta.write_text(json.dumps({**good, "kernels": [["torch.load"]]}))
    code, out, err = replay_here(path, capsys)
    assert (code, out, err.count("\n")) == (1, "", 1) and err.startswith("stepdbg replay: "), err


def test_the_cli_refuses_a_bad_model_spec_in_one_line(saved, tmp_path):
    for spec in ("..:x", ":x", "os:", "a b:c", "nothere.py:build"):
        got = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--model", spec, str(saved[1])],
                             capture_output=True, text=True, cwd=tmp_path, timeout=WAIT, stdin=subprocess.DEVNULL)
        assert got.returncode == 1 and "Traceback" not in got.stderr, (spec, got.stderr)
        assert got.stderr.splitlines()[-1].startswith("stepdbg replay: "), (spec, got.stderr)


SIBLING_MODEL = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)
'''


def test_a_model_in_a_sibling_module_of_a_top_level_script_replays_from_anywhere(tmp_path, capsys, monkeypatch):
    """The bundle recorded the interpreter as the script, and the sibling module was found
    only from the script's folder ('No module named models' elsewhere)."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "models.py").write_text(SIBLING_MODEL)
    (job / "train.py").write_text("import torch\nfrom models import Net\n\ntorch.manual_seed(0)\nmodel = Net()\n"
                                  "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor step in range(3):\n"
                                  "    x = torch.randn(8, 4)\n    if step == 1:\n        x[0, 0] = float('nan')\n"
                                  "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n")
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "save", "--on-break", "skip",
                      "--bundle-dir", str(job), script_args=(str(job / "train.py"),))
    assert run.returncode == 0, run.stderr[-2000:]
    path = Path(run.of("bundle")[0]["path"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = replay_here(path, capsys, "--json")
    assert code == 0 and json.loads(out)["first_nonfinite"]["where"] == "input", err
