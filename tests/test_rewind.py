"""Rewind: snapshots in memory and a run put back on course in place, without a restart.

The failure (demos/corrupt_shard.py): one corrupt batch at step 40 throws the weights off;
its own loss is finite, step 41's is inf, NaN after. Skipping step 41 cannot help.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from conftest import DEMOS, WAIT, run_stepdbg
from torch import nn

DEMO = DEMOS / "corrupt_shard.py"


def final_loss(stdout: str) -> float:
    last = [line for line in stdout.splitlines() if line.startswith("step ")][-1]
    return float(last.split()[-1])


@pytest.mark.slow
def test_without_stepdbg_one_corrupt_batch_ruins_the_run_for_good(tmp_path):
    run = run_stepdbg(tmp_path, "--break", "nan", "--on-break", "skip", script_args=(str(DEMO),))
    assert run.returncode == 0, run.stderr
    # Skipping the step where the NaN shows changes nothing: the damage is in the weights.
    assert final_loss(run.stdout) != final_loss(run.stdout)  # nan


@pytest.mark.slow
def test_on_break_rewind_puts_the_run_back_on_course(tmp_path):
    clean = run_stepdbg(tmp_path, script_args=(str(DEMO), "--bad-step", "-1"))
    run = run_stepdbg(tmp_path, "--break", "nan", "--on-break", "rewind", "--keep-every", "5",
                      script_args=(str(DEMO),))
    assert run.returncode == 0, run.stderr
    losses = [float(line.split()[-1]) for line in run.stdout.splitlines() if line.startswith("step ")]
    assert all(np.isfinite(losses[5:])), losses  # step 50 on: finite (step 40 printed the corrupt batch's loss)
    assert final_loss(run.stdout) < 3 * final_loss(clean.stdout) + 0.05
    (rewind,) = [c for c in run.of("change") if c["what"] == "rewind"]
    assert rewind == {"event": "change", "what": "rewind", "step": 41, "to_step": 40, "batches_skipped": 2,
                      "rewinds": 1, "cause": "break [nan] at step 41"}
    (snap,) = run.of("snapshot")
    assert snap["step"] == 5 and snap["bytes"] > 0
    assert "stepdbg: change: rewind to the snapshot of step 40 (steps 40 and 41 undone)" in run.stderr


@pytest.mark.slow
def test_max_rewinds_then_the_next_break_ends_the_job(tmp_path):
    run = run_stepdbg(tmp_path, "--break", "nan", "--on-break", "rewind", "--keep-every", "5", "--max-rewinds", "0",
                      script_args=(str(DEMO),))
    assert run.returncode == 3
    assert "a break after 0 rewinds (--max-rewinds 0)" in run.stderr


def test_rewind_without_snapshots_is_refused_before_the_script_starts(tmp_path):
    run = run_stepdbg(tmp_path, "--on-break", "rewind", script_args=(str(DEMO),))
    assert run.returncode == 2
    assert run.stderr.strip().endswith("--on-break rewind needs snapshots to go back to: add --keep-every N (e.g. 50)")


def test_rewind_restores_the_same_tensors_bit_for_bit(session_factory):
    """After a rewind the parameters, buffers, optimizer state, scheduler, LR and RNGs equal
    the snapshot's, in the very tensors the optimizer and the loop hold."""
    s = session_factory("step==12", actions=("rewind",))
    s.rewinder.configure(every=5)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    params = list(model.parameters())
    seen: dict[int, dict] = {}
    for step in range(14):
        if step in (10, 13):  # the state step 10 starts from, and where the loop is after the rewind
            seen[step] = {
                "model": {k: v.clone() for k, v in model.state_dict().items()},
                "opt": {k: (v.clone() if isinstance(v, torch.Tensor) else v)
                        for p in params for k, v in opt.state[p].items()},
                "sched": sched.state_dict(), "lr": opt.param_groups[0]["lr"],
                "rng": (torch.get_rng_state(), random.random(), np.random.rand()),
            }
        x = torch.randn(16, 4)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    (rewind,) = [c for c in s.bus.changes if c["what"] == "rewind"]
    assert (rewind["step"], rewind["to_step"]) == (12, 10)
    before, after = seen[10], seen[13]
    for k, v in before["model"].items():
        assert torch.equal(v, after["model"][k]), k
    assert before["opt"].keys() == after["opt"].keys()
    for k, v in before["opt"].items():
        assert torch.equal(torch.as_tensor(v), torch.as_tensor(after["opt"][k])), k
    assert before["sched"] == after["sched"] and before["lr"] == after["lr"]
    assert list(model.parameters()) == params and all(p in opt.state for p in params)  # the same tensors
    assert torch.equal(before["rng"][0], after["rng"][0]) and before["rng"][1:] == after["rng"][1:]


def test_a_rewind_goes_further_back_when_the_last_one_did_not_help(session_factory):
    """A snapshot that led to another break is not tried again: the next rewind takes an
    older one, and snapshots of the abandoned run are dropped."""
    from stepdbg.agent.breaks.rewind import NoSnapshot

    s = session_factory(actions=("report",))
    s.rewinder.configure(every=2, keep=3)
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(7):
        model(torch.randn(3, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
    assert [x["step"] for x in s.rewinder.listing()] == [2, 4, 6]
    first = s.rewinder.choose(at_step=7)
    assert first.step == 6
    s.rewinder.restore(first)
    assert s.rewinder.choose(at_step=7).step == 4
    assert s.rewinder.choose(at_step=7, to_step=2).step == 2
    with pytest.raises(NoSnapshot, match="no snapshot of step 3"):
        s.rewinder.choose(at_step=7, to_step=3)


def test_the_lr_is_scaled_for_the_steps_after_a_rewind_and_the_scheduler_keeps_its_own(session_factory):
    s = session_factory("step==6", actions=("rewind",))
    s.rewinder.configure(every=5, lr_scale=0.5, lr_steps=3)
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    used = []
    opt.register_step_pre_hook(lambda o, args, kwargs: used.append(o.param_groups[0]["lr"]))  # after stepdbg's
    for _ in range(12):
        model(torch.randn(3, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
    # Steps 7, 8 and 9 (after the rewind at the end of step 6) used half the LR.
    assert used == [0.1] * 7 + [0.05] * 3 + [0.1] * 2
    assert opt.param_groups[0]["lr"] == 0.1


def _shard_rows(n: int, bad: range, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Regression rows; the rows in `bad` come from a corrupt shard (features 1e5 too large)."""
    x = torch.randn(n, 16, generator=g)
    y = x @ torch.linspace(-1, 1, 16).unsqueeze(1)
    x[bad.start:bad.stop] *= 1e5
    return x, y


@pytest.mark.timeout(180)
def test_lightning_trainer_rewinds_and_its_step_counter_goes_on(session_factory, tmp_path):
    lightning = pytest.importorskip("lightning")
    import stepdbg

    s = session_factory("nan", actions=("rewind",))
    s.rewinder.configure(every=2)
    stepdbg.use(s)
    losses: list[float] = []

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = nn.functional.mse_loss(self.net(x), y)
            losses.append(float(loss))
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    torch.manual_seed(0)
    x, y = _shard_rows(16 * 8, range(5 * 8, 6 * 8), torch.Generator().manual_seed(0))  # batch 5 is corrupt
    trainer = lightning.Trainer(max_steps=16, accelerator="cpu", logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(Module(), torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8))
    assert s.step == trainer.global_step == 16  # Lightning's counter went on; it noticed nothing
    (rewind,) = [c for c in s.bus.changes if c["what"] == "rewind"]
    assert (rewind["step"], rewind["to_step"]) == (6, 4)
    assert not math.isfinite(losses[6]) and all(math.isfinite(v) for v in losses[7:]), losses
    assert losses[-1] < losses[0], losses  # it goes on learning


@pytest.mark.timeout(180)
def test_hf_trainer_rewinds_and_its_step_counter_goes_on(session_factory, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    s = session_factory("nan", actions=("rewind",))
    s.rewinder.configure(every=2)
    losses: list[float] = []

    class Regressor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))

        def forward(self, x, labels):
            loss = nn.functional.mse_loss(self.net(x), labels)
            losses.append(float(loss))
            return {"loss": loss}

    torch.manual_seed(0)
    x, y = _shard_rows(16 * 8, range(5 * 8, 6 * 8), torch.Generator().manual_seed(0))
    rows = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    model = Regressor()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=16, per_device_train_batch_size=8,
                                          max_grad_norm=0, report_to=[], save_strategy="no", use_cpu=True,
                                          disable_tqdm=True, dataloader_num_workers=0, logging_steps=100)
    class InOrder(transformers.Trainer):  # batch 5 is the corrupt one: no shuffling
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    trainer = InOrder(model=model, args=args, train_dataset=rows,
                      optimizers=(opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)))
    trainer.train()
    assert s.step == trainer.state.global_step == 16
    (rewind,) = [c for c in s.bus.changes if c["what"] == "rewind"]
    assert (rewind["step"], rewind["to_step"]) == (6, 4)
    assert all(math.isfinite(v) for v in losses[7:]) and losses[-1] < losses[0], losses


@pytest.mark.slow
def test_rewind_from_an_attached_client_and_from_the_console(start_job, private_runtime_dir):
    """At a pause: `snapshots` lists them, `rewind` with no snapshot of that step is refused
    in words, `rewind` goes back and the job runs to its end; the console's `rewind` too."""
    from stepdbg import client

    job = start_job("--break", "nan", "--keep-every", "5", script=DEMO)
    job.info()
    with client.connect() as c:
        brk = c.wait_paused(WAIT)
        assert (brk["step"], brk["phase"]) == (41, "before_backward")
        assert [s["step"] for s in c.snapshots()] == [35, 40]
        with pytest.raises(client.ClientError, match="no snapshot of step 12") as refused:
            c.rewind(12)
        assert refused.value.code == "bad_args"  # the step asked for is the caller's mistake, not a failure
        assert c.rewind()["to_step"] == 40
        assert c.memory()["snapshots"][-1]["step"] == 40
        c.remove_break("nan")
        done = c.wait_exited(WAIT)
    assert done["exit_code"] == 0
    code, out, _ = job.finish()
    assert code == 0 and "nan" not in out.split("step 50")[1]

    from stepdbg.client.console import execute

    class Target:  # what the console drives: a Session or a Client (same names)
        def rewind(self, step=None):
            self.asked = step
            return {"what": "rewind", "step": 36, "to_step": 35, "batches_skipped": 2, "rewinds": 1}

    t = Target()
    assert execute(t, "rewind 35") == "resumed" and t.asked == 35
