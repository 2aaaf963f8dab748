"""Whatever reaches the launcher or a post-mortem, the answer is one line or a whole report,
never stepdbg's traceback: odd digits in the environment, a malformed STEPDBG_CONFIG, a port
out of range, an exception object whose str() raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURE, ROOT, WAIT, run_stepdbg

from stepdbg.wire.numbers import ascii_int


def bootstrap(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The job's side of the launcher, as `stepdbg run` starts it."""
    return subprocess.run([sys.executable, "-m", "stepdbg.launch.bootstrap", str(FIXTURE), "--steps", "2"],
                          capture_output=True, text=True, timeout=WAIT, cwd=ROOT, env={**os.environ, **env},
                          stdin=subprocess.DEVNULL)


def test_only_ascii_digits_are_a_number():
    assert [ascii_int(t) for t in ("7", " 12 ", "²", "١", "-1", "", None, "3.0")] == [7, 12] + [None] * 6


@pytest.mark.parametrize("name", ["RANK", "WORLD_SIZE", "LOCAL_RANK"])
def test_odd_digits_in_the_ranks_environment_run_the_script_as_plain_python_does(tmp_path, name):
    run = run_stepdbg(tmp_path, "--no-tui", script_args=(str(FIXTURE), "--steps", "2"),
                      env={"RANK": "0", "WORLD_SIZE": "2", name: "²"})
    assert run.returncode == 0 and "finished" in run.stdout, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(("config", "said"), [
    ("{bad", "STEPDBG_CONFIG is not JSON"),
    ('{"report": 7}', "STEPDBG_CONFIG: report is str | None, not 7"),  # it wrote the report to fd 7
    ('{"quiet": 1}', "STEPDBG_CONFIG: quiet is bool, not 1"),
    ('{"breaks": ["grad_norm>>1"]}', "STEPDBG_CONFIG: "),
])
def test_a_malformed_stepdbg_config_is_one_line_and_exit_code_2(config, said):
    out = bootstrap({"STEPDBG_CONFIG": config})
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"stepdbg: {said}"), out.stderr


def test_attach_to_a_port_out_of_range_is_one_line(tmp_path):
    token = tmp_path / "token"
    token.write_text("secret\n")
    for extra in ((), ("--repl",)):
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "127.0.0.1:99999", "--token-file", str(token),
                              *extra], capture_output=True, text=True, timeout=WAIT, cwd=ROOT, stdin=subprocess.DEVNULL)
        assert out.returncode == 1, out.stderr
        assert out.stderr == "stepdbg: '127.0.0.1:99999': port 99999 is not in 1-65535\n", out.stderr


def test_an_exception_whose_str_raises_still_gets_its_break_and_end_records(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Weird(Exception):
            def __str__(self):
                raise RuntimeError("str fails")

            def __repr__(self):
                raise RuntimeError("repr fails")

        model = nn.Linear(2, 1)
        for step in range(3):
            model(torch.randn(4, 2)).sum().backward()
            if step == 1:
                raise Weird()
    """))
    run = run_stepdbg(tmp_path, "--no-tui", script_args=(str(script),))
    assert run.returncode == 1
    (brk,) = run.of("break")
    assert brk["reason"] == "Weird: <exception str() failed: Weird>" and brk["where"]["line"] == 16
    assert run.of("end")[0]["exit_code"] == 1
    assert "stepdbg/" not in run.stderr and run.stderr.rstrip().endswith("Weird: <exception str() failed>")
    assert json.dumps(run.events)  # every record written whole


def test_a_summary_of_a_billion_element_broadcast_view_reads_a_sample_and_says_so():
    import torch

    from stepdbg.agent.measure.tensors import SAMPLE, slice_of, summarize
    from stepdbg.client.tensor_text import format_summary

    view = torch.full((1,), 0.5).expand(10**9)  # 4 bytes of storage
    s = summarize(view, "view")
    assert s["sampled"]["values"] == SAMPLE and s["sampled"]["of"] == 10**9 and s["min"] == s["max"] == 0.5
    assert f"statistics of {SAMPLE:,} evenly spaced values of 1,000,000,000" in format_summary(s)
    assert slice_of(view, ":400000000", limit=3) == [0.5, 0.5, 0.5]  # no 400M-element copy first
    small = torch.arange(12.0).reshape(3, 4)
    assert "sampled" not in summarize(small) and slice_of(small.t(), "1") == [1.0, 5.0, 9.0]


def test_summaries_and_slices_of_odd_tensors_answer():
    import warnings

    import torch

    from stepdbg.agent.measure.tensors import slice_of, summarize
    from stepdbg.client.tensor_text import format_summary

    meta = summarize(torch.empty(3, 4, device="meta"), "m")
    assert meta["shape"] == [3, 4] and "meta tensor" in format_summary(meta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates making quantized tensors, not reading them
        q = torch.quantize_per_tensor(torch.tensor([1.5, -2.25]), 0.25, 0, torch.qint8)
    assert slice_of(q, "") == [1.5, -2.25] and summarize(q)["min"] == -2.25  # not truncated integers
    assert slice_of(torch.tensor([1 + 2j]), "") == ["(1+2j)"]  # was an error
    assert slice_of(torch.tensor([True, False]), "") == [True, False]


def test_a_summary_whose_mean_overflows_is_said_as_it_comes_over_the_wire():
    """Finite values whose mean, std and norm overflow float32 (`inf`): on the wire a non-finite
    float is its word, and the client's text said `Unknown format code 'g' for object of type
    'str'` (the walk's `info model` NaN norm, met again here in the Tensor summary)."""
    import json

    import torch

    from stepdbg.agent.measure.tensors import summarize
    from stepdbg.client.tensor_text import format_summary
    from stepdbg.wire import protocol

    s = json.loads(json.dumps(protocol.plain(summarize(torch.tensor([1e38, 1e38, 3e38, 3e38]), "big"))))
    assert s["mean"] == "inf", s
    assert "min 1e+38 max 3e+38 mean inf std inf norm inf" in format_summary(s)


def test_the_jobs_other_threads_print_where_they_always_did_during_an_eval(session_factory, capsys):
    s = session_factory("nan")
    answer = s.views.evaluator.evaluate(
        "import threading\n"
        "t = threading.Thread(target=lambda: print('from a thread of the job', flush=True))\n"
        "t.start(); t.join(); print('from the evaluated code')")
    assert answer["output"] == "from the evaluated code\n" and answer["error"] is None, answer
    assert "from a thread of the job" in capsys.readouterr().out  # not lost into the front end's answer


def test_a_file_stepdbg_writes_in_a_shared_place_never_follows_a_planted_link(tmp_path, monkeypatch):
    from stepdbg.agent.measure.memory import new_file

    monkeypatch.chdir(tmp_path)
    target = tmp_path / "precious"
    target.write_text("keep me")
    (tmp_path / "memory-7.pickle").symlink_to(target)  # planted where the snapshot would go
    path = new_file("memory-7", ".pickle", b"snapshot")
    assert target.read_text() == "keep me" and path == str(tmp_path / "memory-7-1.pickle")
    assert new_file("memory-7", ".pickle", b"again") == str(tmp_path / "memory-7-2.pickle")  # nor over a file
    assert (tmp_path / "memory-7-1.pickle").read_bytes() == b"snapshot"


DEEP = """
    import sys, weakref
    import torch, stepdbg
    from torch import nn

    stepdbg.watch("step==2", on_break="pause")
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    class Thing:
        pass

    thing = Thing()
    dead = weakref.proxy(thing)
    del thing
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    for step in range(3):
        y = model(torch.randn(8, 4)).sum()
        deep = y
        for _ in range(60_000):  # a graph of 60,000 nodes kept alive at the pause
            deep = deep * 1.0001
        deep.backward()
        opt.step()
        opt.zero_grad()
    print("done")
"""


def test_the_memory_view_on_a_deep_graph_a_nested_tensor_and_a_dead_proxy_answers_in_part(tmp_path):
    """Every object in the paused frames: the census walks 10,000 autograd nodes and says so
    (walking all of a 60,000-node chain made torch crash the job later), counts what it
    cannot measure, and the job ends 0."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(DEEP))
    proc = subprocess.run([sys.executable, str(script)], input="info mem\nc\n", capture_output=True, text=True,
                          timeout=WAIT, cwd=ROOT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]
    assert "in part: saved activations found in the first 10,000 autograd nodes" in proc.stderr, proc.stderr
    assert "tensors by category" in proc.stderr and "Traceback" not in proc.stderr


def test_a_second_interrupt_of_one_evaluation_is_not_sent(session_factory):
    """The time limit's interrupt and a client's, on one evaluation: the second Ctrl-C landed
    after the first was handled and ended the pause (CI under load: 'the job resumed before
    this request ran'). One is sent; the second answers True and sends nothing."""
    import threading

    s = session_factory("nan")
    ev = s.views.evaluator
    started, first_caught, go, done = (threading.Event() for _ in range(4))
    caught = []

    def user_code() -> None:
        try:
            with ev.interruptible():
                try:
                    started.set()
                    while not first_caught.is_set():
                        pass
                except KeyboardInterrupt:
                    caught.append("in the code")
                    first_caught.set()
                go.wait(WAIT)
                for _ in range(200_000):  # a second one would be delivered here
                    pass
        except KeyboardInterrupt:
            caught.append("after the code")
        done.set()

    t = threading.Thread(target=user_code, daemon=True)
    t.start()
    assert started.wait(WAIT)
    assert ev.interrupt("first") is True
    assert first_caught.wait(WAIT)
    assert ev.interrupt("second") is True  # the code still runs: a Ctrl-C is on its way or done
    go.set()
    assert done.wait(WAIT)
    assert caught == ["in the code"]


def test_a_slice_index_that_is_no_index_is_said_in_words(start_job, private_runtime_dir):
    """The Tensor panel's slice field with `zz` toasted `slice: ValueError: invalid literal for
    int() with base 10: 'zz'` (a newcomer's walk at 80x24); an index past the shape, torch's
    IndexError. Both are the caller's bad arguments, in words."""
    from stepdbg import client
    from stepdbg.client import ClientError

    job = start_job("--break", "step==2", script_args=("--steps", "4"))
    info = job.info()
    with client.connect(info.id) as c:
        assert c.wait_paused(WAIT)["step"] == 2
        with pytest.raises(ClientError) as bad:
            c.slice("x", "zz")
        assert bad.value.code == "bad_args" and "'zz' is not an index: a whole number or a slice" in str(bad.value)
        with pytest.raises(ClientError) as past:
            c.slice("x", "9, 0")
        assert past.value.code == "bad_args" and "does not fit x, of shape [8, 4]: dimension 0 takes 0 to 7" in str(
            past.value) and "out of bounds" not in str(past.value), past.value  # (not torch's words)
        assert c.slice("x", "0, :2") == c.slice("x", "0")[:2]  # a right index still answers
        c.close(then="continue")
    assert job.proc.wait(WAIT) == 0


@pytest.mark.parametrize("index", ["::0", "0, ::-1"])
def test_a_slice_step_of_zero_or_below_is_said_in_words(index):
    """The fourth walk's item 4: `::0` in the Tensor panel's slice field showed
    `refused: ValueError: slice step cannot be zero` (torch's, not an IndexError)."""
    import torch

    from stepdbg.agent.measure import tensors

    with pytest.raises(tensors.BadIndex, match=r"a slice's step is a whole number above 0"):
        tensors.slice_of(torch.zeros(4, 4), index)
