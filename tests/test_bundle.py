"""The evidence bundle (--on-break save) and `stepdbg replay BUNDLE`: a job that must go on
keeps what a replay needs, and a fresh process, elsewhere, names what the live replay
named and says whether the fault comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, WAIT, marked_line, run_stepdbg
from torch import nn

from stepdbg.agent.replay import bundle

NAN_LOG = ROOT / "demos" / "nan_log.py"
TRANSIENT = ROOT / "demos" / "transient_fault.py"


def replay_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepdbg", "replay", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=WAIT, stdin=subprocess.DEVNULL)


def test_save_and_skip_runs_to_the_end_and_a_replay_elsewhere_names_what_the_live_one_named(tmp_path):
    saved = tmp_path / "bundles"
    saved.mkdir()
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
                      "--on-break", "skip", "--bundle-dir", str(saved), script_args=(str(NAN_LOG),))
    assert run.returncode == 0 and run.stdout.rstrip().endswith("done"), run.stderr[-2000:]
    (live,), (event,) = run.of("replay"), run.of("bundle")
    path = Path(event["path"])
    assert (event["saved"], path.name, path.parent) == (True, "stepdbg-step30", saved), event
    assert f"evidence bundle: {path} (replay it: stepdbg replay {path})" in run.stderr
    data = torch.load(path / "tensors.pt", weights_only=True)  # torch's own format, no pickled user object
    assert set(data["parameters"]) == {"head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias"}

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    offline = replay_cli("--json", str(path), cwd=elsewhere)
    assert offline.returncode == 0, offline.stderr
    got = json.loads(offline.stdout)
    keys = ("where", "module", "module_type", "op", "file", "line")
    assert {k: got["first_nonfinite"][k] for k in keys} == {k: live["first_nonfinite"][k] for k in keys}
    assert got["first_nonfinite"]["line"] == marked_line(NAN_LOG, "nan-here")
    assert (got["reproduced"], got["summary"]) == (True, live["summary"]), got

    words = replay_cli(str(path), cwd=elsewhere)  # in words: what the job's stderr said
    assert words.returncode == 0 and f"replay of step 30: {live['summary']}" in words.stdout, words

    gone, pipe = os.pipe()
    os.close(gone)  # the reader left before the answer came (`| head -c 20`)
    piped = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--json", str(path)], cwd=elsewhere,
                           stdout=pipe, stderr=subprocess.PIPE, text=True, timeout=WAIT)
    os.close(pipe)
    assert piped.returncode == 0 and "Traceback" not in piped.stderr, piped.stderr


def test_a_transient_fault_saved_and_replayed_offline_is_not_reproduced(tmp_path):
    """The demo's flaky layer corrupts one forward; rebuilt by its factory (the model is an
    nn.Sequential made in the script, holding a module of the script's own class: the bundle's
    record of torch's modules cannot rebuild that one, and says so)."""
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "save", "--on-break", "skip",
                      "--bundle-dir", str(tmp_path), script_args=(str(TRANSIENT),))
    assert run.returncode == 0, run.stderr[-2000:]
    path = run.of("bundle")[0]["path"]
    refused = replay_cli(path, cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "the model's module 1 is a Flaky of __main__, not one of torch.nn's: its code is needed: give --model" \
        in refused.stderr, refused.stderr  # (its torch modules are rebuilt from the bundle: module_tree.py)
    offline = replay_cli("--json", "--model", f"{TRANSIENT}:build", path, cwd=tmp_path)
    got = json.loads(offline.stdout)
    assert (got["reproduced"], got["first_nonfinite"]) == (False, None), got
    assert got["verdict"].startswith("not reproduced from the same state: a transient fault"), got


def bundle_events(report: Path) -> list[dict]:
    return [e for e in map(json.loads, report.read_text().splitlines()) if e["event"] == "bundle"]


def test_a_bundle_is_never_written_through_a_planted_link_nor_into_a_directory_there(session_factory, tmp_path):
    target = tmp_path / "victim"
    target.mkdir()
    (tmp_path / "stepdbg-step0").symlink_to(target)
    (tmp_path / "stepdbg-step0-2").mkdir()
    s = session_factory("nan", actions=("save",), bundle_dir=str(tmp_path), report=str(tmp_path / "r.jsonl"))
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    x = torch.randn(2, 4)
    x[0, 0] = float("nan")
    model(x).sum().backward()
    s.stop()
    (record,) = bundle_events(tmp_path / "r.jsonl")
    assert record["path"] == str(tmp_path / "stepdbg-step0-3") and list(target.iterdir()) == [], record
    assert list((tmp_path / "stepdbg-step0-2").iterdir()) == []


def test_saving_stops_at_the_cap_and_says_so(session_factory, tmp_path):
    s = session_factory("every=1", actions=("save",), bundle_dir=str(tmp_path), report=str(tmp_path / "r.jsonl"))
    model = nn.Linear(2, 1)
    for _ in range(bundle.MAX_BUNDLES + 2):
        model(torch.randn(3, 2)).sum().backward()
    s.stop()
    records = bundle_events(tmp_path / "r.jsonl")
    assert [r["saved"] for r in records] == [True] * bundle.MAX_BUNDLES + [False] * 2, records
    assert records[-1]["error"] == f"this run saved {bundle.MAX_BUNDLES} bundles already (the cap)"
    assert len(list(tmp_path.glob("stepdbg-step*"))) == bundle.MAX_BUNDLES


@pytest.mark.parametrize("what", ["missing", "not a bundle"])
def test_replay_of_what_is_not_a_bundle_is_one_line(tmp_path, what):
    path = tmp_path / "nothing"
    if what == "not a bundle":
        path.mkdir()
        (path / "meta.json").write_text("{}")
        (path / "tensors.pt").write_bytes(b"not torch")
    got = replay_cli(str(path), cwd=tmp_path)
    assert got.returncode in (1, 2) and got.stderr.count("\n") == 1 and "Traceback" not in got.stderr, got.stderr
    assert got.stderr.startswith("stepdbg"), got.stderr


def test_a_nan_born_after_the_model_replayed_offline_says_so(tmp_path):
    """Live, the replay searches the loss's graph and names the op; a bundle holds the model,
    not the loss's code, and its replay said 'no gradient was captured at the model output',
    true but beside the point: the break had found the model's output finite."""
    script = ROOT / "tests" / "fixtures" / "nan_after_model.py"
    saved = tmp_path / "bundles"
    saved.mkdir()
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
                      "--bundle-dir", str(saved), script_args=(str(script),))
    (live,), (event,) = run.of("replay"), run.of("bundle")
    assert live["first_nonfinite"]["line"] == marked_line(script, "planted"), live
    got = replay_cli(event["path"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "born in the loss computation, after the model" in got.stdout, got.stdout
    assert "no gradient was captured" not in got.stdout, got.stdout
