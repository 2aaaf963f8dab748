"""The step model under the trainers people use, unmodified: PyTorch Lightning (closure-style
automatic optimization), the Hugging Face Trainer (accelerate), LBFGS. Tiny models, a few
steps, data made here, nothing downloaded."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import marked_line, run_stepdbg
from torch import nn

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)

PAUSE_POINTS = ["before_forward", "after_forward", "before_backward", "after_backward", "before_optimizer_step"]


def test_a_closure_step_pauses_in_order_with_this_steps_pre_clip_norm_and_skip_keeps_weights(session_factory):
    """What Lightning does, by hand: forward, backward and clipping inside opt.step(closure)."""
    s = session_factory("step==2", actions=("skip",))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen: dict = {"norms": [], "order": []}
    opt.register_step_post_hook(lambda o, a, k: seen["order"].append(list(s.model.current.phase_times)))
    before_update = {}
    for step in range(4):
        x, y = torch.randn(8, 4), torch.randn(8, 1)

        def closure(x=x, y=y) -> torch.Tensor:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            seen["norms"].append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)))
            return loss

        if step == 2:
            before_update = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step(closure)
        if step == 2:
            assert all(torch.equal(p, before_update[n]) for n, p in model.named_parameters()), "skip applied nothing"
    assert s.step == 4
    assert seen["order"] == [PAUSE_POINTS] * 4
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx(seen["norms"])  # this step's, before clipping
    assert [h["skipped"] for h in s.model.history] == [False, False, True, False]


def test_lbfgs_is_one_step_per_step_call_with_the_first_closures_norm(session_factory):
    s = session_factory("nan")
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=4)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    norms = []

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norms.append(float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()]))))
        return loss

    firsts = []
    for _ in range(3):
        firsts.append(len(norms))
        opt.step(closure)
    assert s.step == 3
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx([norms[i] for i in firsts])


def _regression(lightning: Any, weights: dict[int, torch.Tensor]) -> Any:
    """A LightningModule fitting a small MLP by MSE; before each update its weights go to
    `weights`, by global step. Tests subclass it for their optimizers."""

    class Regression(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def on_before_optimizer_step(self, optimizer):  # after backward, before Lightning clips
            weights[self.trainer.global_step] = torch.cat([p.detach().flatten() for p in self.parameters()]).clone()

    return Regression


def _fit(lightning: Any, module: Any, x: torch.Tensor, tmp_path: Any, **trainer: Any) -> Any:
    """Five steps of `module` on (x, noise) in batches of 8, with nothing written but logs."""
    fit = lightning.Trainer(max_steps=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path, **trainer)
    fit.fit(module, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, torch.randn(len(x), 1)), batch_size=8))
    return fit


def test_lightning_trainer_steps_norms_skip_and_a_pinned_lr(session_factory, tmp_path):
    lightning = pytest.importorskip("lightning")
    import stepdbg

    s = session_factory("step==2", actions=("skip",))
    stepdbg.use(s)
    norms: list[float] = []
    weights: dict[int, torch.Tensor] = {}

    class Module(_regression(lightning, weights)):
        def on_before_optimizer_step(self, optimizer):
            super().on_before_optimizer_step(optimizer)
            norms.append(float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in self.parameters()]))))
            if self.trainer.global_step == 1:
                stepdbg.current().changer.set_lr(0.05, pin=True)  # what `lr 0.05 pin` does from a front end

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]

    torch.manual_seed(0)
    trainer = _fit(lightning, Module(), torch.randn(48, 4), tmp_path, gradient_clip_val=0.25)
    assert s.step == trainer.global_step == 5
    (brk,) = s.breaks  # step==2, checked before the forward: in training_step, Lightning's frame beside
    assert brk.where["file"] == __file__ and brk.where["function"] == "training_step"
    assert "lightning" in brk.where["framework"]["file"]
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx(norms)  # this step's, before clipping
    assert [h["skipped"] for h in s.model.history] == [False, False, True, False, False]
    assert torch.equal(weights[2], weights[3]), "the skipped update changed the weights"
    assert [h["lr"][0] for h in s.model.history][1:] == pytest.approx([0.05] * 4)  # held through StepLR


def test_lightning_with_fused_adamw_skips_a_nan_batch_on_the_device(session_factory, tmp_path):
    """--skip-on-device under Lightning's closure step: the NaN batch's update is skipped by
    fused AdamW's kernel, the break comes a step later naming it, and training goes on."""
    lightning = pytest.importorskip("lightning")
    s = session_factory("nan", skip_on_device=True)
    weights: dict[int, torch.Tensor] = {}

    class Module(_regression(lightning, weights)):
        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2, fused=True)

    torch.manual_seed(0)
    x = torch.randn(48, 4)
    x[17, 1] = float("nan")  # batch 2
    module = Module()
    _fit(lightning, module, x, tmp_path)
    (brk,) = s.breaks
    assert brk.details["skipped_on_device"] == 2 and brk.reason.startswith("step 2: loss is nan"), brk
    assert [h["skipped"] for h in s.model.history] == [False, False, True, False, False]
    assert torch.equal(weights[2], weights[3]), "the skipped update changed the weights"
    assert all(torch.isfinite(p).all() for p in module.parameters())


def test_hf_trainer_steps_and_the_logged_grad_norm(session_factory, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    s = session_factory("nan")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=64, n_positions=16)
    model = transformers.GPT2LMHeadModel(cfg)
    rows = [{"input_ids": (ids := torch.randint(0, 64, (12,))), "labels": ids} for _ in range(16)]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4,
                                          logging_steps=1, max_grad_norm=1.0, report_to=[], save_strategy="no",
                                          use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    logged = [r["grad_norm"] for r in trainer.state.log_history if "grad_norm" in r]
    assert s.step == trainer.state.global_step == 4
    assert [h["grad_norm"] for h in s.model.history] == pytest.approx([float(v) for v in logged], rel=1e-4)
    assert all(math.isfinite(h["loss"]) for h in s.model.history)


def test_hf_trainer_with_fused_adamw_skips_a_nan_step_on_the_device(session_factory, tmp_path):
    """--skip-on-device under the HF Trainer (accelerate's wrapped optimizer,
    optim="adamw_torch_fused"): a callback makes step 2's forward NaN (its position
    embeddings, put back after the step); the update is skipped on the device, so the
    model is finite at the end (a plain run's update writes NaN into every parameter)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    s = session_factory("nan", skip_on_device=True)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=64,
                                                                 n_positions=16))
    wpe = model.transformer.wpe.weight

    class NaNAtStep2(transformers.TrainerCallback):
        kept: torch.Tensor | None = None

        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == 2:
                self.kept = wpe.detach().clone()
                with torch.no_grad():
                    wpe.fill_(float("nan"))

        def on_step_end(self, args, state, control, **kw):
            if self.kept is not None:
                with torch.no_grad():
                    wpe.copy_(self.kept)
                self.kept = None

    rows = [{"input_ids": (ids := torch.randint(0, 64, (12,))), "labels": ids} for _ in range(24)]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=5, per_device_train_batch_size=4,
                                          max_grad_norm=1.0, report_to=[], save_strategy="no", use_cpu=True,
                                          disable_tqdm=True, dataloader_num_workers=0, optim="adamw_torch_fused")
    transformers.Trainer(model=model, args=args, train_dataset=rows, callbacks=[NaNAtStep2()]).train()
    (brk,) = s.breaks  # (told a step late: at step 3's update)
    assert brk.reason.startswith("step 2: loss is nan"), brk.reason
    assert [h["skipped"] for h in s.model.history] == [False, False, True, False, False]
    assert all(torch.isfinite(p).all() for p in model.parameters())


# Dynamo and AOTAutograd, what stepdbg's hooks meet, without inductor's C++ build of each
# graph (twice, cold in the run's temp folder: 88 s of the suite on 2 busy cores).
COMPILE_BACKEND = "aot_eager"


def _compiled_losses(with_stepdbg: bool) -> tuple[list[float], int, list[str], int | None]:
    import warnings

    import torch._dynamo
    from torch._dynamo.utils import counters

    from stepdbg.agent.session import Session
    from stepdbg.wire.agent_config import AgentConfig

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend=COMPILE_BACKEND)
    g = torch.Generator().manual_seed(0)
    losses, steps = [], None
    with warnings.catch_warnings(record=True) as caught:
        s = Session(AgentConfig(breaks=["nan", "grad_norm>1e9"], quiet=True)).start() if with_stepdbg else None
        try:
            for _ in range(3):
                x, y = torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)
                opt.zero_grad()
                loss = nn.functional.mse_loss(compiled(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        finally:
            if s is not None:
                steps = s.step
                s.stop()
    return losses, sum(counters["graph_break"].values()), [str(w.message) for w in caught], steps


def test_torch_compile_is_untouched():
    """No graph break, no warning, the same losses to the bit; and the steps are seen."""
    plain, plain_breaks, _, _ = _compiled_losses(False)
    watched, breaks, warned, steps = _compiled_losses(True)
    assert (breaks, plain_breaks) == (0, 0)
    assert watched == plain
    assert not [w for w in warned if "hook" in w or "Dynamo" in w], warned
    assert steps == 3


def test_tied_weights_count_once_in_the_module_tree(session_factory):
    """GPT-2 ties lm_head to wte: the Model panel counted it twice (236,288 for 172,288)."""
    from stepdbg.agent.views import inspection

    s = session_factory("nan")

    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(100, 16)
            self.lm_head = nn.Linear(16, 100, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.lm_head(self.wte(ids))

    model = Tied()
    model(torch.randint(0, 100, (2, 5))).sum().backward()
    rows = {r["name"]: r["params"] for r in inspection.module_tree(s.model)}
    assert rows["(root)"] == sum(p.numel() for p in model.parameters()) == 1600
    assert rows["wte"] == rows["lm_head"] == 1600


def test_a_compiled_step_is_replayed_eagerly_and_names_what_made_the_nan(session_factory):
    """The compiled wrapper runs a graph where no hook sees an op: the replay runs the
    original module, op by op, and names the parameter an inf was written into."""
    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(3):
        if step == 2:
            with torch.no_grad():
                model[2].weight[0, 3] = float("inf")
        loss = compiled(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    (brk,) = s.breaks
    first = s.views.replays[0]["first_nonfinite"]
    assert brk.step == 2 and (first["where"], first["tensor"]) == ("parameter", "2.weight"), first


@pytest.mark.parametrize("strategy", ["single", "ddp"])
def test_a_lightning_break_is_placed_where_training_step_made_the_loss(tmp_path, strategy):
    """Lightning's closure calls backward and steps the optimizer, not the user's file: a break
    there (a NaN loss before the backward, a gradient norm before the update) is placed at the
    training_step line that returned the loss, not at the script's `trainer.fit(...)`. Under
    the DDP strategy (two CPU processes, gloo) training_step runs inside the DDP wrapper's
    forward, which the trainer calls: the break was placed at `trainer.fit(...)`."""
    pytest.importorskip("lightning")
    script = Path(__file__).parent / "fixtures" / "lightning_top_level.py"
    run = run_stepdbg(tmp_path, "--break", "nan", "--break", "grad_norm>1e4",
                      script_args=(str(script), *(["ddp"] if strategy == "ddp" else [])))
    assert run.returncode == 0, run.stderr
    norm, nan = run.of("break")
    assert (norm["step"], norm["phase"], nan["step"], nan["phase"]) == (2, "before_optimizer_step", 3, "before_backward")
    line = marked_line(script, "returns-loss")
    for brk in (norm, nan):
        assert (brk["where"]["file"], brk["where"]["line"], brk["where"]["function"]) == (str(script), line, "training_step")
        assert "lightning" in brk["where"]["framework"]["file"]
    assert run.stderr.count(f"at {script}:{line}  return loss") == 2, run.stderr
    assert f":{marked_line(script, 'fit')}" not in run.stderr


def test_a_lightning_module_run_as_a_wrappers_forward_is_not_replayed_and_says_why(session_factory):
    """Lightning's DDP and FSDP strategies run training_step as the wrapper's forward (its
    _ForwardRedirection); the module has no forward of its own. The replay said
    'NotImplementedError: Module [Module] is missing the required "forward" function'."""
    lightning = pytest.importorskip("lightning")
    from lightning.pytorch.strategies.strategy import _ForwardRedirection

    s = session_factory("nan", actions=("replay",))

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self.net(x) * float("nan"), y)

    module = Module()
    wrapper = nn.DataParallel(module)  # DDP's place, in one CPU process: its forward calls the module
    _ForwardRedirection()(wrapper, module, "training_step", (torch.randn(8, 4), torch.randn(8, 1)), 0).backward()
    (replay,) = s.views.replays
    assert "Module has no forward of its own: Lightning's DDP or FSDP strategy ran its training_step" in \
        replay["summary"], replay
