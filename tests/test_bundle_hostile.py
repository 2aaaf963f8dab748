"""What a second attacker's walk of bundles found (issue 43), each held now: a recorded script
reached through a link in another user's folder, `stepdbg diff` and `python -m stepdbg`
importing a module shipped beside the bundle, a pickle of shared lists that walks 2**31
paths, escape sequences in the dataset indices, an import that parses the bundle's argv
and exits, a source file of gigabytes named for its hash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import WAIT
from test_bundle_trust import TOP_LEVEL, copy_of, replay_here, saved  # noqa: F401 - the module's fixture

OTHER_UID = 1234  # another user: the attacker


def test_a_script_reached_through_a_link_in_another_users_folder_runs_none_of_theirs(saved, tmp_path,  # noqa: F811
                                                                                       capsys):
    """The link's folder was put on sys.path: the user's own script's `import mymodel` loaded
    the attacker's mymodel.py beside the link."""
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user's needs root")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "mymodel.py").write_text(TOP_LEVEL.split("torch.manual_seed(0)")[0])
    (mine / "train.py").write_text("from mymodel import Net\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    marker = tmp_path / "ran"
    (theirs / "mymodel.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (theirs / "train.py").symlink_to(mine / "train.py")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    path = copy_of(saved, tmp_path, model_module="mymodel", model_qualname="Net",
                   model_script=str(theirs / "train.py"))
    code, out, err = replay_here(path, capsys)
    assert not marker.exists(), err
    assert code == 0 and f"the definitions of {mine / 'train.py'}" in err and "replay of step 2" in out, err


def test_a_module_shipped_in_a_bundle_is_never_imported_by_diff_or_python_m(saved, tmp_path):  # noqa: F811
    a, b = copy_of(saved, tmp_path / "a"), copy_of(saved, tmp_path / "b")
    marker = tmp_path / "ran"
    for folder in (a, b):
        for name in ("torch.py", "textwrap.py", "json.py"):
            (folder / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    diff = subprocess.run([sys.executable, "-m", "stepdbg", "diff", ".", str(b)], cwd=a, capture_output=True,
                          text=True, timeout=WAIT, stdin=subprocess.DEVNULL)
    helped = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--help"], cwd=a, capture_output=True,
                            text=True, timeout=WAIT, stdin=subprocess.DEVNULL)  # argparse's help: textwrap
    replay = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "."], cwd=a, capture_output=True, text=True,
                            timeout=WAIT, stdin=subprocess.DEVNULL)
    assert not marker.exists(), marker.read_text()
    assert diff.returncode == 0 and "the runs agree" in diff.stdout, diff.stderr[-2000:]
    assert helped.returncode == 0 and "usage: stepdbg replay" in helped.stdout, helped.stderr
    assert replay.returncode == 0 and "replay of step 2" in replay.stdout, replay.stderr


def _with_tensors(saved: tuple[Path, Path], where: Path, **changes: object) -> Path:  # noqa: F811
    path = copy_of(saved, where)
    data = torch.load(path / "tensors.pt", weights_only=True)
    data.update(changes)
    torch.save(data, path / "tensors.pt")
    return path


def test_a_pickle_of_shared_lists_is_refused_in_one_line_at_once(saved, tmp_path, capsys):  # noqa: F811
    x: object = torch.zeros(1)
    for _ in range(31):  # 17 KB on disk; 2**31 paths for a walk that follows each
        x = [x, x]
    code, out, err = replay_here(_with_tensors(saved, tmp_path, sample_indices=x), capsys)
    assert (code, out, err.count("\n")) == (1, "", 1) and "over 1,000,000 values, nested or shared" in err, err


def test_the_dataset_indices_reach_the_terminal_escaped(saved, tmp_path, capsys):  # noqa: F811
    hostile = "\x1b]0;TITLE\x07\x1b[31mRED\rOVERWRITE\nstepdbg: a forged line"
    code, out, err = replay_here(_with_tensors(saved, tmp_path, sample_indices=[hostile] * 16), capsys)
    assert code == 0 and "dataset index" in out, err
    assert not any(c in out + err for c in "\x1b\x07\r") and "\nstepdbg: a forged line" not in out, out


def test_an_import_that_parses_the_bundles_argv_and_exits_is_one_line(saved, tmp_path, capsys):  # noqa: F811
    job = tmp_path / "job"
    job.mkdir()
    (job / "cfg.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    (job / "train.py").write_text("import cfg\n" + TOP_LEVEL)
    for argv, exit_code in ((["train.py", "--help"], 0), (["train.py", "--bogus"], 2)):
        path = copy_of(saved, tmp_path / argv[1].strip("-"), model_script=str(job / "train.py"), argv=argv)
        code, out, err = replay_here(path, capsys, "--json")
        assert (code, out) == (1, ""), (out, err)
        assert err.splitlines()[-1] == (f"stepdbg replay: {job / 'train.py'}: its definitions did not load "
                                        f"(SystemExit: {exit_code})"), err


def test_a_source_file_of_gigabytes_is_not_read_for_its_hash(saved, tmp_path, capsys):  # noqa: F811
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that a whole read would hold in memory
    code, out, err = replay_here(copy_of(saved, tmp_path, model_file=str(big), model_code_sha256="0" * 64), capsys)
    assert code == 0 and "replay of step 2" in out and "changed since" not in out, err

