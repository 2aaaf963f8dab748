"""What an attacker's walk of `stepdbg replay` found (issue 43), each held now: code shipped
in a bundle and replayed from inside it, `--model` naming the bundle's own file, escape
sequences in its text, a script in a folder anyone can write, a constructor that exits, an
expanded view that claims gigabytes, a name walked through a module; and what the
definitions-only load must keep (a lambda that calls, real annotations)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_bundle_trust import TOP_LEVEL, copy_of, replay_here, saved  # noqa: F401 - the module's fixture

from stepdbg.agent.replay.model_code import definitions


def cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    """The `stepdbg` command as installed (`python -m stepdbg` would itself import from the
    current directory first, as any `python -m` does)."""
    command = os.path.join(os.path.dirname(sys.executable), "stepdbg")
    return subprocess.run([command, "replay", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_replayed_from_inside_the_bundle_its_shipped_modules_never_load(saved, tmp_path):  # noqa: F811
    path = copy_of(saved, tmp_path)
    for name in ("torch", "json", "hashlib", "argparse", "numpy", "model"):
        (path / f"{name}.py").write_text(f"open({str(tmp_path / ('ran-' + name))!r}, 'w').write('ran')\n")
    got = cli(".", cwd=path)
    assert got.returncode == 0 and "replay of step" in got.stdout and "Traceback" not in got.stderr, got.stderr
    assert not list(tmp_path.glob("ran-*"))
    refused = cli("--model", "model.py:build", ".", cwd=path)
    assert refused.returncode == 1 and "names the bundle's own files" in refused.stderr, refused.stderr
    assert not list(tmp_path.glob("ran-*"))


def test_a_bundles_text_reaches_the_terminal_escaped(saved, tmp_path, capsys):  # noqa: F811
    path = copy_of(saved, tmp_path, left_out=["\x1b]52;c;cHduZWQ=\x07\x1b[2K\rok"],
                   versions={"stepdbg": "0.1.0\x1b[8m", "torch": "2\n  reproduced: FAKE\r", "python": "3"})
    code, out, err = replay_here(path, capsys)
    assert code == 0 and "\x1b" not in out + err and "\r" not in out and "\n  reproduced: FAKE" not in out, out
    assert "\\x1b[8m" in out
    bad = copy_of(saved, tmp_path / "x", model_script=str(tmp_path / "a\x1b[8m.py"))
    code, out, err = replay_here(bad, capsys)
    assert code == 1 and "\x1b" not in err and "model.script is not printable text" in err, err


def test_a_recorded_script_in_a_folder_anyone_can_write_is_not_read(saved, tmp_path, capsys):  # noqa: F811
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "train.py").write_text(TOP_LEVEL)
    path = copy_of(saved, tmp_path, model_script=str(shared / "train.py"))
    code, out, err = replay_here(path, capsys)
    assert code == 1 and "its folder is not yours alone (another user may write into it)" in err and "--model" in err, err


def test_a_constructor_that_exits_or_prints_is_one_line_and_json_stays_clean(saved, tmp_path, capsys):  # noqa: F811
    script = tmp_path / "train.py"
    script.write_text(TOP_LEVEL.replace("        super().__init__()\n", "        super().__init__()\n"
                                        "        print('building')\n        import sys\n"
                                        "        if '--help' in sys.argv:\n            raise SystemExit(0)\n", 1))
    path = copy_of(saved, tmp_path / "b", model_script=str(script), argv=["train.py", "--help"])
    code, out, err = replay_here(path, capsys, "--json")
    assert (code, out) == (1, "") and err.splitlines()[-1].startswith("stepdbg replay: Net() failed: SystemExit"), err
    path = copy_of(saved, tmp_path / "c", model_script=str(script))
    code, out, err = replay_here(path, capsys, "--json")
    assert code == 0 and json.loads(out)["step"] is not None and "building" in err


def test_an_expanded_view_that_claims_more_than_the_file_holds_is_refused(saved, tmp_path, capsys):  # noqa: F811
    path = copy_of(saved, tmp_path)
    data = torch.load(path / "tensors.pt", weights_only=True)
    data["batch"] = torch.ones(1, 4).expand(64 << 20, 4)  # 1 GiB claimed by 16 bytes
    os.unlink(path / "tensors.pt")
    torch.save(data, path / "tensors.pt")
    code, out, err = replay_here(path, capsys)
    assert code == 1 and "an expanded view claims more than the file holds" in err, err


@pytest.mark.parametrize("module, qualname", [("stepdbg.agent.replay.offline", "torch._inductor.Nope"),
                                              ("stepdbg.agent.replay.offline", "torch.nn.Module")])
def test_a_recorded_name_is_never_walked_through_a_module(saved, tmp_path, capsys, module, qualname):  # noqa: F811
    path = copy_of(saved, tmp_path, model_module=module, model_qualname=qualname)
    code, out, err = replay_here(path, capsys)
    assert code == 1 and "is not a name in" in err, err


def test_definitions_keep_a_lambda_that_calls_and_real_annotations(tmp_path):
    f = tmp_path / "defs.py"
    f.write_text("import torch\nact = lambda t: t.relu()\nTABLE = {'relu': lambda t: t.relu()}\n"
                 "def g(x: int) -> int:\n    return x\nbad = (lambda t=print('ran'): t)\n")
    m = definitions(str(f), "stepdbg_test_defs")
    assert m.act(torch.tensor([-1.0])).item() == 0.0 and "relu" in m.TABLE and m.g.__annotations__["x"] is int
    assert not hasattr(m, "bad")


def test_format_must_be_the_integer_one(saved, tmp_path, capsys):  # noqa: F811
    path = copy_of(saved, tmp_path, format=1.0)
    assert replay_here(path, capsys)[0] == 1
    shutil.rmtree(path)



def test_a_tensors_file_swapped_for_a_link_after_the_check_is_never_followed(tmp_path, monkeypatch):
    """The attacker's race: tensors.pt is a plain file when it is checked and a link to
    another file (here: another bundle's weights) by the time torch.load opens it."""
    from stepdbg.agent.replay import bundle, bundle_check

    def written(name: str, fill: float) -> Path:
        model = torch.nn.Linear(4, 1)
        torch.nn.init.constant_(model.weight, fill)
        x = torch.randn(2, 4)
        cap = {"step": 1, "args": (x,), "kwargs": {}, "batch": x, "rng": {"cpu": torch.get_rng_state()}}
        return bundle.write(tmp_path, name, model, cap, {}, {})

    mine, other = written("mine", 1.0), written("other", 7.0)
    real = bundle_check.regular

    def check_then_swap(p: Path) -> os.stat_result:
        st = real(p)
        if p.name == "tensors.pt" and not p.is_symlink():
            p.unlink()
            p.symlink_to(other / "tensors.pt")
        return st

    monkeypatch.setattr(bundle_check, "regular", check_then_swap)
    try:
        _, data = bundle.read(mine)
    except bundle.BundleError as e:
        assert "symbolic link" in str(e)
    else:
        assert data["parameters"]["weight"].eq(1.0).all(), "the link's target was loaded"
