"""Findings: each rule names its failure on its demo, and says nothing on healthy runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import DEMOS, ROOT, WAIT
from torch import nn

from stepdbg.agent.doctor.diagnostics import RULES, Doctor
from stepdbg.agent.doctor.measurements import determinism_check, overfit_verdict

pytestmark = pytest.mark.slow  # real processes end to end (see pyproject: slow)


def doctor(demo: str, *args: str, mode: str = "doctor", script_args: tuple[str, ...] = ()) -> dict:
    out = subprocess.run([sys.executable, "-m", "stepdbg", mode, "--json", "-q", *args, sys.executable,
                          str(DEMOS / demo), *script_args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode in (0, 1), out.stderr
    result = json.loads(out.stdout)  # the JSON alone: the script's own stdout went to stderr
    assert out.returncode == (1 if result["findings"] else 0)
    return result


# Each slow sample of slow_loader takes 2 s: a loop that a busy machine slows hides little of it.
SCRIPT_ARGS = {"slow_loader.py": ("--slow", "2")}


@pytest.mark.parametrize(
    ("demo", "args", "first", "words"),
    [
        ("no_zero_grad.py", (), "stale_grad", "zero_grad() was not called"),  # row 3
        ("vanishing_sigmoid.py", (), "vanishing_gradients", "through Sigmoid activations"),  # row 4
        ("lr_explode.py", ("--steps", "20"), "exploding_updates", "of their norm"),  # row 2
        ("slow_loader.py", ("--steps", "19"), "slow_dataloader", "num_workers=2"),  # row 5
        ("slow_get_batch.py", ("--steps", "4"), "slow_dataloader", "no DataLoader: the host time between steps"),  # row 5, nanoGPT's way
        ("mse_on_classes.py", (), "loss_target_mismatch", "look like class indices"),  # row 6
        ("unscaled_features.py", (), "input_scale", "input feature 3 reaches"),  # row 7
        ("memory_leak.py", ("--steps", "16"), "memory_growth", "keeps tensors alive"),  # row 9 (found at step 13)
        ("nondeterministic.py", (), "nondeterministic", "Python's or numpy's RNG"),  # row 11
        ("eval_mode.py", (), "eval_mode_training", "trains with the model in eval mode"),  # row 12
    ],
)
def test_doctor_names_the_right_finding_first(demo, args, first, words):
    r = doctor(demo, *args, script_args=SCRIPT_ARGS.get(demo, ()))
    assert r["findings"], f"no finding on {demo}"
    top = r["findings"][0]
    assert top["rule"] == first and words in top["message"], r["findings"]
    assert top["rule"] in RULES and top["advice"]


def test_lr_explode_also_says_the_loss_climbs():
    rules = [f["rule"] for f in doctor("lr_explode.py", "--steps", "20")["findings"]]
    assert rules == ["exploding_updates", "lr_too_high"]


@pytest.mark.parametrize(("demo", "args", "script_args"), [
    ("healthy.py", (), ()),
    ("nan_log.py", ("--steps", "25"), ()),  # healthy until its bad sample at step 30
    ("lr_explode.py", ("--steps", "20"), ("--lr", "0.01")),  # the same loop at a sane LR
    # without the heavy transform, loading in the loop: two workers' round trips on a machine
    # whose cores are busy elsewhere really are data-bound, so that case is no healthy one
    ("slow_loader.py", ("--steps", "19"), ("--slow", "0", "--workers", "0")),
])
def test_doctor_finds_nothing_on_healthy_runs(demo, args, script_args):
    assert doctor(demo, *args, script_args=script_args)["findings"] == []


def test_overfit_on_a_loop_without_a_dataloader_says_it_has_no_batch_to_repeat():
    out = subprocess.run([sys.executable, "-m", "stepdbg", "overfit", "--json", "-q", sys.executable,
                          str(DEMOS / "nan_log.py")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 2, out.stderr
    result = json.loads(out.stdout)
    assert result["overfit"]["reached_near_zero"] is None and result["steps"] == 1
    assert "took no batch from a DataLoader in its first step" in result["overfit"]["verdict"]
    said = subprocess.run([sys.executable, "-m", "stepdbg", "overfit", sys.executable, str(DEMOS / "nan_log.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    words = " ".join((said.stdout + said.stderr).replace("│", " ").split())
    assert said.returncode == 2 and words.count("there is no batch to repeat") == 1, said.stdout + said.stderr


def test_overfit_one_batch_says_whether_it_fits():
    ok = doctor("healthy.py", "--steps", "100", mode="overfit")
    assert ok["findings"] == [] and ok["overfit"]["reached_near_zero"] is True
    bad = doctor("cannot_overfit.py", "--steps", "30", mode="overfit")
    assert [f["rule"] for f in bad["findings"]] == ["cannot_overfit"]
    assert "it cannot fit even one batch" in bad["findings"][0]["message"]
    assert overfit_verdict([1.0, 0.5, 0.01])[0] and not overfit_verdict([1.0, 0.9, 0.8])[0]
    ok, words = overfit_verdict([1.195] + [0.5] * 48 + [0.1329])  # 9x lower in 50 steps: too few to say
    assert not ok and "not fit yet, though the loss is still falling (9.0x lower): run more steps (--steps 100)" \
        in words and "cannot fit even one batch" not in words


def loops():
    """The healthy loop styles of the step-model tests, each as a function of a session."""
    def dataloader_loop():
        from torch.utils.data import DataLoader, TensorDataset

        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for x, y in DataLoader(TensorDataset(torch.randn(160, 4), torch.randn(160, 1)), batch_size=8):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    def accumulation_clip_hand_lr():
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for it in range(12):
            for g in opt.param_groups:
                g["lr"] = 1e-3 * (it + 1) / 12
            for _ in range(4):
                (nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)) / 4).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

    def manual_sgd():
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        for _ in range(12):
            nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None

    def scheduler():
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        for _ in range(12):
            opt.zero_grad()
            nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
            opt.step()
            sched.step()

    return [dataloader_loop, accumulation_clip_hand_lr, manual_sgd, scheduler]


@pytest.mark.parametrize("loop", loops(), ids=lambda f: f.__name__)
def test_no_finding_on_the_healthy_loop_styles(session_factory, loop):
    torch.manual_seed(0)
    s = session_factory("nan")
    s.doctor = Doctor()
    s.model.armed = True
    loop()
    assert s.doctor.findings == []


def test_determinism_check_on_a_deterministic_step(session_factory):
    s = session_factory("nan")
    s.model.armed = True
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.zero_grad()
    nn.functional.mse_loss(model(torch.randn(16, 4)), torch.randn(16, 1)).backward()
    r = determinism_check(s.model)  # dropout masks come back with the RNG state
    assert r["checked"] and r["reproducible"] and r["max_output_diff"] == 0 and r["max_grad_diff"] == 0
    assert "deterministic_algorithms" in r and "torch_seed_looks_set" in r


def test_a_domain_error_is_not_called_a_learning_rate_problem(tmp_path):
    """log(0) out of the blue makes the loss NaN with steady gradient norms: not lr_too_high."""
    script = tmp_path / "log_zero.py"
    script.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "for step in range(20):\n"
        "    x = torch.rand(16, 4) + 0.1\n"
        "    if step >= 10:\n"
        "        x[0, 0] = 0.0\n"
        "    opt.zero_grad()\n"
        "    nn.functional.mse_loss(model(torch.log(x)), torch.randn(16, 1)).backward()\n"
        "    opt.step()\n")
    r = doctor(str(script))
    assert "lr_too_high" not in [f["rule"] for f in r["findings"]]


def test_doctor_table_wraps_long_advice_instead_of_cutting_it(capsys, monkeypatch):
    """Piped at 60 columns, every word of the measured value and of the advice is printed
    (a long call wraps, unbroken), none replaced by an ellipsis."""
    from stepdbg_tui.doctor import show

    advice = "call optimizer.zero_grad(set_to_none=True) before loss.backward() in every step"
    finding = {"severity": "warning", "rule": "stale_grad", "step": 3, "message": "grads grew by 2x", "advice": advice}
    monkeypatch.setenv("COLUMNS", "60")
    show([finding], 10, 0, None)
    out = capsys.readouterr().out
    assert "…" not in out
    assert f"try: {advice}" in " ".join(out.split())  # every word, whole (a block per finding at 60)


def preempted_loop(s, monkeypatch, preempted: bool, where: str) -> list:
    """A tiny loop that spends 30 ms a step `where`: between steps (a get_batch), or between
    its forward and its backward (a micro-batch's loss; nanoGPT's prefetch). `preempted`:
    the kernel's run-queue count says the thread waited for a CPU all that time (a busy
    machine), else it was the loop's own host time."""
    from stepdbg.agent.measure import preempted as preempted_mod

    injected = [0.0]
    real = preempted_mod.waited_for_cpu
    monkeypatch.setattr(preempted_mod, "waited_for_cpu", lambda: real() + injected[0])
    s.doctor = Doctor()
    s.model.armed = True
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def host_time() -> None:
        t0 = time.perf_counter()
        time.sleep(0.03)
        if preempted:
            injected[0] += time.perf_counter() - t0

    for _ in range(8):
        if where == "between steps":
            host_time()
        opt.zero_grad()
        out = model(torch.randn(8, 4))
        if where == "in the loss":
            host_time()
        nn.functional.mse_loss(out, torch.randn(8, 1)).backward()
        opt.step()
    return [f.rule for f in s.doctor.findings]


@pytest.mark.parametrize("where", ["between steps", "in the loss"])
@pytest.mark.parametrize("preempted", [True, False], ids=["preempted", "own host time"])
def test_a_loop_preempted_between_steps_is_not_called_data_bound(session_factory, monkeypatch, preempted, where):
    """On a busy machine a healthy get_batch() loop was '94% of its time getting data'
    (CI under load): time the training thread waited for a CPU is not data wait; the
    same 30 ms spent by the loop itself is. In the loss: a healthy loop of 4 micro-batches
    was '66% of a 10 ms step getting data' under load, its losses' preempted time counted
    as the next step's prefetch (test_no_finding_on_the_healthy_loop_styles, 1 run in 30)."""
    rules = preempted_loop(session_factory("nan"), monkeypatch, preempted, where)
    assert ("slow_dataloader" in rules) is not preempted, rules


def test_a_slow_loader_on_a_busy_machine_is_still_found(session_factory, monkeypatch):
    """Under load the step's own work is preempted too (CI missed slow_get_batch's finding:
    its 0.1 s fetches beside a compute that other processes stretched). Time the step's
    work waited for a CPU is not compute: 50 ms of real fetch beside 200 ms of preempted
    compute is data-bound."""
    from stepdbg.agent.measure import preempted as preempted_mod

    injected = [0.0]
    real = preempted_mod.waited_for_cpu
    monkeypatch.setattr(preempted_mod, "waited_for_cpu", lambda: real() + injected[0])

    class Preempted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t0 = time.perf_counter()
            time.sleep(0.2)
            injected[0] += time.perf_counter() - t0  # the kernel says: waiting for a CPU all along
            return self.fc(x)

    s = session_factory("nan")
    s.doctor = Doctor()
    model = Preempted()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(6):
        time.sleep(0.05)  # get_batch, on the loop's own time
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
    assert "slow_dataloader" in [f.rule for f in s.doctor.findings]


def test_the_run_queue_count_is_read_from_the_kernel():
    """waited_for_cpu() grows while another process holds this thread's only CPU."""
    from stepdbg.agent.measure.preempted import waited_for_cpu

    if not os.path.exists("/proc/thread-self/schedstat") or not hasattr(os, "sched_setaffinity"):
        pytest.skip("no per-thread schedstat here (not Linux)")
    cpu = min(os.sched_getaffinity(0))
    before_affinity = os.sched_getaffinity(0)
    busy = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        os.sched_setaffinity(0, {cpu})
        start = waited_for_cpu()
        deadline = time.monotonic() + WAIT
        while waited_for_cpu() <= start and time.monotonic() < deadline:
            sum(range(10_000))  # runnable all the time: the CPU is shared with the busy process
        assert waited_for_cpu() > start
    finally:
        os.sched_setaffinity(0, before_affinity)
        busy.kill()
        busy.wait()


class SlowCompute(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.08)  # as long as a real step's compute
        return self.fc(x)


def test_a_nanogpt_loop_that_waits_for_its_prefetched_batches_is_found(session_factory):
    """nanoGPT fetches the next batch between forward and backward: that time is inside the
    step's time, and the rule counted it twice (as data and as compute): a 0.05 s fetch
    beside 0.08 s of compute read as 28%, under the rule's 30%, and doctor said nothing on
    nanoGPT's data-bound run though it found the bundled demo (which fetches before the forward)."""
    s = session_factory("nan")
    s.doctor = Doctor()
    model = SlowCompute()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.05)
        return torch.randn(8, 4), torch.randn(8, 1)

    x, y = get_batch()
    for _ in range(8):
        loss = nn.functional.mse_loss(model(x), y)
        x, y = get_batch()
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert [f.rule for f in s.doctor.findings] == ["slow_dataloader"], s.doctor.findings



def test_overfits_table_is_titled_overfit(capsys):
    from stepdbg_tui.doctor import show

    finding = {"rule": "cannot_overfit", "severity": "error", "step": 30, "message": "m", "advice": "a"}
    show([finding], 30, 1, {"reached_near_zero": False, "verdict": "the loss went from 1 to 0.9"})
    out = capsys.readouterr().out
    assert "stepdbg overfit: 1 finding in 30 steps" in out and "stepdbg doctor" not in out


def test_findings_at_80_columns_are_blocks_with_whole_words(capsys, monkeypatch):
    """A table of five columns at 80 broke words in two ('cross_entrop' / 'y')."""
    from stepdbg_tui.doctor import show

    monkeypatch.setenv("COLUMNS", "80")
    finding = {"rule": "mse_on_class_targets", "severity": "error", "step": 0,
               "message": "the loss is mse_loss on integer class indices", "advice": "use cross_entropy on logits"}
    show([finding], 20, 1, None)
    out = capsys.readouterr().out
    assert "error mse_on_class_targets (step 0)" in out and "try: use cross_entropy on logits" in out, out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_lr_too_high_in_a_loop_without_an_optimizer_says_so(session_factory):
    """pytorch/examples' word_language_model updates its weights by hand (p.data.add_(p.grad,
    alpha=-lr)): at --lr 1e30 the finding said 'at lr ?' and advised `lr X pin`, which has no
    optimizer to act on."""
    s = session_factory("nan")
    s.doctor = Doctor()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    for _ in range(6):
        model.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-3.0)
    (finding,) = [f for f in s.doctor.findings if f.rule == "lr_too_high"]
    assert "lr ?" not in finding.message and "with no optimizer" in finding.message, finding
    assert "lr X pin" not in finding.advice, finding
