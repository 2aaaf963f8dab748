"""A 2-rank gloo job whose NaN comes from rank 1's data (issue 44, item 4): rank 0's
gradients take it in through DDP's all-reduce, so rank 0's own step, replayed, stays
finite. Its verdict must say the value came from another rank, and name rank 1: live it
said "another rank" without naming it, and the offline replay of rank 0's bundle (no
process group there) said "a transient fault"."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from test_ranks import FIXTURE, WAIT

pytestmark = pytest.mark.slow  # real torchrun end to end (see pyproject: slow)

FACTORY = ROOT / "tests" / "fixtures" / "ddp_model.py"


def test_rank_0s_verdict_live_and_from_its_bundle_names_rank_1_whose_data_held_the_nan(tmp_path):
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    cmd = [sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
           "--on-break", "skip", "--bundle-dir", str(bundles), "--report", str(tmp_path / "r.jsonl"), "torchrun",
           "--standalone", "--nproc_per_node=2", str(FIXTURE), "--nan-at", "3", "--steps", "5"]
    job = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert job.returncode == 0 and job.stdout.count("finished") == 2, job.stderr[-3000:]
    events = {r: [json.loads(x) for x in (tmp_path / f"r.rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    (theirs,) = [e for e in events[1] if e["event"] == "replay"]
    assert (theirs["first_nonfinite"]["where"], theirs["first_nonfinite"]["tensor"]) == ("input", "x"), theirs
    (live,) = [e for e in events[0] if e["event"] == "replay"]
    assert (live["first_nonfinite"], live["reproduced"], live["from_rank"]) == (None, None, 1), live
    assert "came in through the all-reduce from rank 1" in live["verdict"], live["verdict"]
    (saved,) = [e for e in events[0] if e["event"] == "bundle"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--json", "--model", f"{FACTORY}:build",
                          saved["path"]], cwd=elsewhere, capture_output=True, text=True, timeout=WAIT,
                         stdin=subprocess.DEVNULL)
    assert got.returncode == 0, got.stderr
    offline = json.loads(got.stdout)
    assert (offline["bundle"]["rank"], offline["first_nonfinite"], offline["reproduced"]) == (0, None, None), offline
    assert (offline["verdict"], offline["from_rank"]) == (live["verdict"], 1), offline
    assert "transient" not in offline["verdict"]


def test_rank_0s_break_names_rank_1_without_a_replay(tmp_path):
    """The default action (report), no replay, no bundle: rank 0's break on its gradients
    says they came in through the all-reduce from rank 1, whose own loss was non-finite
    (before: rank 1 was named only where it had replayed or saved at its break)."""
    cmd = [sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--report", str(tmp_path / "r.jsonl"),
           "torchrun", "--standalone", "--nproc_per_node=2", str(FIXTURE), "--nan-at", "3", "--steps", "5"]
    job = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert job.returncode == 0 and job.stdout.count("finished") == 2, job.stderr[-3000:]
    events = {r: [json.loads(x) for x in (tmp_path / f"r.rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    (mine,) = [e for e in events[1] if e["event"] == "break"]
    assert mine["reason"].startswith("loss is nan"), mine
    (theirs,) = [e for e in events[0] if e["event"] == "break"]
    assert theirs["details"]["from_rank"] == 1, theirs
    assert "they came in through the all-reduce from rank 1, whose own loss was not" in theirs["reason"], theirs
