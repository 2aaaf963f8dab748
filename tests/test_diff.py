"""`stepdbg diff A B` (issue 46): two command lines run under the agent with a fingerprint
recorder, and the first place they part is named. Real torch, real subprocesses; the
scripts are tests/fixtures/diff_*.py."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from stepdbg.wire.step_diff import Record, compare, first_divergence

FIX = ROOT / "tests" / "fixtures"
PY = shlex.quote(sys.executable)


def line(script: str, *args: str) -> str:
    return " ".join([PY, shlex.quote(str(FIX / script)), *args])


def diff(*argv: str, tmp: os.PathLike[str] | None = None, cwd: os.PathLike[str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return subprocess.run([sys.executable, "-m", "stepdbg", "diff", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=600)


def ours(tmp: os.PathLike[str]) -> list[str]:
    """diff's private folders left in TMPDIR (stepdbg-0 is every job's runtime folder)."""
    return [n for n in os.listdir(tmp) if n.startswith("stepdbg-diff-")]


def answer(r: subprocess.CompletedProcess[str]) -> dict:
    assert r.stdout.lstrip().startswith("{"), (r.stdout, r.stderr)
    return json.loads(r.stdout)


# ---------------------------------------------------------------------- the comparison (no job)


def fp(*samples: float, h: str = "h") -> dict:
    return {"shape": [len(samples)], "dtype": "float32", "hash": h, "nonfinite": 0, "stats": [0.0] * 4,
            "samples": list(samples)}


def test_bitwise_compares_hashes_and_a_tolerance_compares_numbers():
    assert compare(fp(1.0, h="a"), fp(1.0, h="a"), 0, 0) is None
    d = compare(fp(1.0, h="a"), fp(1.0 + 1e-7, h="b"), 0, 0)
    assert d is not None and d["reason"] == "the bytes differ"
    assert compare(fp(1.0, h="a"), fp(1.0 + 1e-7, h="b"), 1e-6, 0) is None
    d = compare(fp(1.0, h="a"), fp(1.1, h="b"), 1e-3, 1e-3)
    assert d is not None and d["past"] > 40 and d["max_abs"] == pytest.approx(0.1)
    assert compare(fp(1.0), {**fp(1.0), "shape": [2]}, 1, 1)["reason"].startswith("shapes differ")
    assert compare(fp(float("nan"), h="a"), fp(float("nan"), h="a"), 0, 0) is None
    assert compare(fp(float("nan")), fp(1.0), 1, 1) is not None


def test_the_first_entry_in_order_is_named_and_a_different_path_is_said():
    def e(module: str, what: str, f: dict, call: int = 0) -> dict:
        return {"step": 0, "phase": "forward", "module": module, "what": what, "call": call, "fp": f,
                "class": "Linear", "file": "m.py", "line": 3}

    a = Record(steps={0: [e("a", "output", fp(1.0)), e("b.fc", "input[0]", fp(2.0, h="x")),
                          e("c", "output", fp(3.0, h="y"))]}, step_lines={0: {}})
    b = Record(steps={0: [e("a", "output", fp(1.0)), e("b.fc", "input[0]", fp(2.5, h="z")),
                          e("c", "output", fp(9.0, h="w"))]}, step_lines={0: {}})
    d = first_divergence(a, b, [0])
    assert d is not None and (d["module"], d["what"], d["line"]) == ("b", "input[0]", 3)  # made in b's own code
    b.steps[0][1] = e("other", "output", fp(2.0, h="x"))
    d = first_divergence(a, b, [0])
    assert d is not None and "different paths" in d["summary"]
    assert first_divergence(a, a, [0]) is None


# ---------------------------------------------------------------------- bad arguments (no job starts)


@pytest.mark.parametrize(("argv", "said"), [
    (["", "python x.py"], "A is empty"),
    (["python x.py", "   "], "B is empty"),
    (["python 'x.py", "python x.py"], "A: No closing quotation"),
    (["python /nonexistent/train.py", "python x.py"], "A: script '/nonexistent/train.py' not found"),
    (["python x.py"], "B is needed"),
    (["--steps", "0", "a", "b"], "--steps needs a whole number"),
    (["--atol", "-1", "a", "b"], "--atol needs a number >= 0"),
    (["--rtol", "nan", "a", "b"], "--rtol needs a number >= 0"),
    (["torchrun x.py", "python x.py"], "A: torchrun"),
])
def test_a_bad_argument_is_one_line_and_exit_code_2(tmp_path, argv, said):
    (tmp_path / "x.py").write_text("print('x')\n")
    if "torchrun" in argv[0]:
        (tmp_path / "torchrun").write_text("")
        argv = [str(tmp_path / "torchrun") + " x.py", argv[1]]
    r = diff(*argv, cwd=tmp_path)
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], r.stderr
    assert r.stdout == ""


# ---------------------------------------------------------------------- real runs


@pytest.mark.slow
def test_one_blocks_layernorm_eps_is_named_at_step_0_forward(short_tmp, tmp_path):
    kept = tmp_path / "runs"
    r = diff("--json", "--keep-records", str(kept), line("diff_blocks.py", "--eps2", "1e-5"),
             line("diff_blocks.py", "--eps2", "1e-1"), tmp=short_tmp)
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["call"], d["what"]) == (0, "forward", "blocks.2.ln", 0, "output")
    assert d["class"] == "LayerNorm" and d["file"] == str(FIX / "diff_blocks.py")
    assert "self.ln(x)" in (FIX / "diff_blocks.py").read_text().splitlines()[d["line"] - 1]
    assert d["max_abs"] > 0 and d["tolerance"]["mode"] == "bitwise" and "blocks.2.ln" in d["summary"]
    assert "running A: " in r.stderr and "running B: " in r.stderr
    assert not ours(short_tmp)  # the private folder is gone
    # In words (of the kept records: test_diff_keep): the answer's line, the tolerance, A and B; the same exit code.
    r = diff(str(kept / "A.jsonl"), str(kept / "B.jsonl"))
    out = r.stdout.splitlines()
    assert r.returncode == 1 and out[0].startswith("first divergence: step 0, forward") and "blocks.2.ln" in out[0]
    assert out[1] == "no randomness found that moved"  # (test_diff_randomness_said: what moved, where it did)
    assert out[2].startswith("tolerance: bitwise") and out[3].startswith("A: ") and out[4].startswith("B: ")


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "steps"), [
    ("diff_dropout.py", [], "3"), ("diff_loader.py", [], "3"),
    ("diff_hf.py", [], "3"),  # HF GPT-2 from a config: dropout, DataLoader workers, AdamW, clipping
    ("diff_lightning.py", [], "3"),  # Lightning's Trainer: the optimizer step's closure runs the forward
])
def test_two_identical_seeded_runs_agree(script, args, steps):
    r = diff("--json", "--steps", steps, line(script, *args), line(script, *args))
    assert r.returncode == 0, r.stderr
    result = answer(r)
    assert result["first_divergence"] is None
    assert result["fingerprints"]["A"] == result["fingerprints"]["B"] > 50
    assert result["calls_left_out"] == {"A": 0, "B": 0}


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "module", "what"), [("--numpy-noise", "blocks.1", "input[0]"),
                                                      ("--torch-noise", "blocks.3.noise", "output")])
def test_unseeded_noise_in_one_submodule_is_named(tmp_path, flag, module, what):
    kept = tmp_path / "runs"
    r = diff("--json", "--keep-records", str(kept), line("diff_blocks.py", flag), line("diff_blocks.py", flag))
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"]) == (0, "forward", module, what), d
    if flag == "--torch-noise":
        kept_records_compare_as_the_runs_did(kept, r)


def kept_records_compare_as_the_runs_did(kept, r) -> None:
    """(test_diff_keep has the rest) Each run's record kept, private; compared again with no
    run, the same answer; a tolerance above the noise lets the same runs agree, and says so."""
    a, b = kept / "A.jsonl", kept / "B.jsonl"
    assert f"A's record kept: {a}" in r.stderr and f"B's record kept: {b}" in r.stderr
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700 and sorted(os.listdir(kept)) == ["A.jsonl", "B.jsonl"]
    assert stat.S_IMODE(a.stat().st_mode) == stat.S_IMODE(b.stat().st_mode) == 0o600
    again = diff("--json", str(a), str(b))
    assert again.returncode == 1 and "running" not in again.stderr, again.stderr
    assert answer(again)["first_divergence"] == answer(r)["first_divergence"]
    r = diff("--json", "--atol", "0.05", str(a), str(b))
    assert r.returncode == 0 and answer(r)["tolerance"] == {"mode": "tolerance", "atol": 0.05, "rtol": 0.0}
    r = diff(str(a), line("diff_blocks.py"))  # a kept baseline against a new run: only B runs
    assert r.returncode == 1 and "running B" in r.stderr and "running A" not in r.stderr, r.stderr
    assert r.stdout.startswith("first divergence: step 0")


@pytest.mark.slow
@pytest.mark.parametrize(("how", "steps", "said"), [
    ("crash", "1", "A failed (exit code 1): RuntimeError: the data file is missing"),
    ("nostep", "1", "A ran no training step"),
    ("short", "3", "A ran 2 training steps of the 3 asked (--steps 3)"),
])
def test_a_run_with_nothing_to_compare_is_one_line_and_exit_code_2(short_tmp, tmp_path, how, steps, said):
    r = diff("--steps", steps, line("diff_bad.py", how), line("diff_bad.py", how), tmp=short_tmp)
    assert r.returncode == 2, r
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"stepdbg diff: {said}" or (last.startswith("stepdbg diff: ") and said in last), r.stderr
    assert "running B" not in r.stderr and r.stdout == ""
    assert not ours(short_tmp)


@pytest.mark.slow
def test_the_module_calls_a_step_records_are_capped_and_said():
    r = diff("--json", "--max-calls", "3", line("diff_dropout.py"), line("diff_dropout.py"))
    assert r.returncode == 0, r.stderr
    result = answer(r)
    assert result["calls_left_out"]["A"] == 5 and result["max_calls"] == 3  # 8 calls a step: 7 layers and the root
    assert "5 module calls past --max-calls left out" in r.stderr


@pytest.mark.slow
def test_recording_leaves_the_jobs_numbers_as_they_are(tmp_path):
    """The job under the recorder prints what it prints alone: same losses and weights
    (dropout draws from the RNG the recorder must not touch), and the record is 0600."""
    script = str(FIX / "diff_dropout.py")
    plain = subprocess.run([sys.executable, script, "4"], capture_output=True, text=True, timeout=300)
    record = tmp_path / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPDBG_CONFIG=json.dumps(
        {"breaks": [], "quiet": True, "fingerprint": {"path": str(record), "steps": 2, "max_calls": 100}}))
    recorded = subprocess.run([sys.executable, "-m", "stepdbg.launch.bootstrap", script, "4"],
                              capture_output=True, text=True, env=env, timeout=300)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == plain.stdout and plain.stdout.count("\n") == 4
    assert os.stat(record).st_mode & 0o777 == 0o600
    kinds = [json.loads(x).get("kind") for x in record.read_text().splitlines()]
    assert kinds[0] == "header" and kinds.count("step") == 2 and kinds[-1] == "end"


# ---------------------------------------------------------------------- bundles as A and B

BUNDLE_SCRIPT = """
import torch, stepdbg
from torch import nn
stepdbg.watch("step==0", on_break="save")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.fc(self.ln(x))
        return x + self.drop(h{change})  # @change


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        x, y = torch.randn(8, 16), torch.randn(8, 1)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_two_bundles_of_two_checkouts_compare_from_a_third_folder(tmp_path):
    """Two checkouts of a training script, the second with one change in Block.forward (a
    later commit); each run saves the bundle of step 0; from a third folder `stepdbg diff`
    names the first module call that differs: the first block's dropout's argument, made in
    the block's own code at the changed line. The same bundle twice agrees (dropout
    restored); a bundle and a command, or a folder that is no bundle, are one line."""
    bundles = []
    for name, change in (("a", ""), ("b", " * 1.001")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(BUNDLE_SCRIPT.replace("{change}", change))
        r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path / name, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
        assert r.returncode == 0, r.stderr
        bundles.append(str(tmp_path / name / "stepdbg-step0"))
    (tmp_path / "c").mkdir()
    r = diff("--json", *bundles, cwd=tmp_path / "c", tmp=tmp_path / "c")
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"], d["input_of"]) == \
        (0, "forward", "blocks.0", "input[0]", "blocks.0.drop"), d
    assert d["file"] == str(tmp_path / "a" / "train.py") and d["line"] == BUNDLE_SCRIPT.splitlines().index(
        next(x for x in BUNDLE_SCRIPT.splitlines() if "# @change" in x)) + 1
    assert ours(tmp_path / "c") == []
    r = diff("--json", bundles[0], bundles[0], cwd=tmp_path / "c")
    assert r.returncode == 0 and answer(r)["first_divergence"] is None, r.stderr
    assert answer(r)["fingerprints"]["A"] > 20
    r = diff(bundles[0], "python train.py", cwd=tmp_path / "a")
    assert r.returncode == 2 and "compare a bundle with a bundle" in r.stderr
    r = diff(str(tmp_path / "c"), str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 2 and "is a folder, not an evidence bundle" in r.stderr


@pytest.mark.parametrize(("spec", "said"), [
    ({"path": "r", "steps": 0, "max_calls": 1}, "steps must be a whole number from 1"),
    ({"path": "r", "steps": True, "max_calls": 1}, "steps must be a whole number from 1"),
    ({"path": "", "steps": 1, "max_calls": 1}, "path must be a file's path"),
    ({"path": "r", "steps": 1, "max_calls": 10**9}, "max_calls must be a whole number from 1 to 1,000,000"),
    ({"path": "r", "steps": 1}, "fingerprint needs path, steps and max_calls"),
    ("r", "fingerprint is dict[str, Any] | None"),
])
def test_the_recorders_configuration_is_checked_before_the_job_starts(spec, said):
    from stepdbg.wire.agent_config import AgentConfig

    with pytest.raises(ValueError, match=said.replace("|", r"\|").replace("[", r"\[")):
        AgentConfig.from_json(json.dumps({"fingerprint": spec}))


def test_a_tensor_past_two_to_the_24_values_is_fingerprinted_to_its_last_value():
    """The sample positions were a float32 linspace: past 2**24 values the last rounded to
    one past the end, and the recorder failed on any tensor that large (an LLM's embedding)."""
    from stepdbg.agent.diff.fingerprint import SAMPLES, fingerprint

    x = torch.arange(2**24 + 3, dtype=torch.float32)
    f = fingerprint(x)
    assert len(f["samples"]) == SAMPLES and f["samples"][0] == 0 and f["samples"][-1] == float(x[-1])
    assert f["nonfinite"] == 0 and f["stats"][3] == float(x[-1])
    x[5] = float("inf")
    assert fingerprint(x)["nonfinite"] == 1
    big = fingerprint(torch.tensor([3e38, 3e38, float("nan")]))  # finite values whose float32 sum overflows
    assert big["nonfinite"] == 1 and big["stats"][0] == pytest.approx(3e38) and all(v < float("inf") for v in big["stats"])
