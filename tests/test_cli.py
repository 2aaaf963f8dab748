"""The launcher: arguments, __main__, output and exit codes are the script's own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, WAIT, run_stepdbg


def stepdbg(*args: str, cwd: Path = ROOT, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepdbg", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def echo_script(tmp_path: Path) -> Path:
    p = tmp_path / "echo.py"
    p.write_text(textwrap.dedent("""
        import json, os, sys
        import torch
        print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                          "stepdbg_loaded": "stepdbg.agent.session" in sys.modules}))
        print("to stderr", file=sys.stderr)
        sys.exit(int(os.environ.get("EXIT_WITH", "0")))
    """))
    return p


@pytest.mark.parametrize("prefix", [[], ["run"], ["run", sys.executable], [sys.executable]])
def test_script_arguments_main_and_path_are_kept(echo_script, prefix):
    out = stepdbg(*prefix, str(echo_script), "--lr", "3e-4", "--break", "x", "-q")
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[0])
    assert seen["argv"] == [str(echo_script), "--lr", "3e-4", "--break", "x", "-q"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(echo_script.parent)
    assert seen["stepdbg_loaded"] is True  # the agent was there before the script's first line
    assert "to stderr" in out.stderr


def test_exit_code_is_the_scripts(echo_script):
    env = {**os.environ, "EXIT_WITH": "7"}
    out = subprocess.run([sys.executable, "-m", "stepdbg", str(echo_script)], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    assert out.returncode == 7


def test_dash_m_runs_a_module_as_main(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    out = stepdbg("-m", "mypkg.train", "a", "--b", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "__main__ ['a', '--b']"


def test_uncaught_exception_prints_like_python_and_exits_1(tmp_path):
    p = tmp_path / "boom.py"
    p.write_text("def f():\n    raise ValueError('boom')\nf()\n")
    out = stepdbg(str(p))
    assert out.returncode == 1
    assert "ValueError: boom" in out.stderr and f'File "{p}", line 2, in f' in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--break", "grad_norm>>1", "x.py"], "stepdbg: bad condition 'grad_norm>>1':"),
        (["--break", "foo", "x.py"], "stepdbg: bad condition 'foo': unknown condition"),
        (["--break", "grad_norm>1000 and step>3", "x.py"],  # (the twentieth walk's 11: no way out was said)
         "is not a number; more than one test is an expression: 'expr:grad_norm>1000 and step>3'"),
        (["--on-break", "explode", "x.py"], "unknown --on-break action 'explode'"),
        (["--break"], "--break needs a value"),
        ([], "no script to run"),
        (["--frobnicate", "x.py"], "unknown option '--frobnicate'"),
        (["missing_script.py"], "script 'missing_script.py' not found"),
        (["--report", "/no/such/dir/r.jsonl", "demos/nan_log.py"], "folder '/no/such/dir' does not exist"),
        (["python-does-not-exist", "x.py"], "interpreter 'python-does-not-exist' not found"),
        (["--listen", "127.0.0.1:99999", "demos/nan_log.py"], "port 99999 is not in 0-65535"),
        (["--report", "/tmp", "demos/nan_log.py"], "--report '/tmp' is a folder; name a file in it"),
        (["--report", "/dev/full", "demos/nan_log.py"], "is not a regular file (a FIFO, socket or device)"),
        (["--break", "expr:loss+" + "1+" * 50_000 + "1", "demos/nan_log.py"], "at most 1000 are accepted"),
        (["--break", "expr:9**9**9 < step", "demos/nan_log.py"], "** takes a number up to 64 as its exponent"),
        *[(["--detach-timeout", v, "demos/nan_log.py"], f"--detach-timeout '{v}': expected a number of seconds")
          for v in ("nan", "inf", "0", "-5", "soon")],
        *[(["demos/nan_log.py", f"{name}={v}"], f"{name}='{v}': expected a number of seconds")
          for name in ("STEPDBG_AUTH_TIMEOUT", "STEPDBG_CLIENT_STALL", "STEPDBG_EVAL_TIMEOUT")
          for v in ("nan", "inf", "-1")],
        (["demos/nan_log.py", "STEPDBG_AUTH_TIMEOUT=0"], "STEPDBG_AUTH_TIMEOUT='0': expected a number of seconds"),
        (["ls", "STEPDBG_SSH="], "STEPDBG_SSH is empty: set it to the ssh command"),
        (["replay"], "BUNDLE is needed; e.g. stepdbg replay BUNDLE (see stepdbg replay --help)"),
    ],
)
def test_bad_input_is_refused_before_the_script_starts(args, message, monkeypatch):
    for setting in [a for a in args if a.startswith("STEPDBG_")]:  # an environment variable, not an argument
        monkeypatch.setenv(*setting.split("=", 1))
    out = stepdbg(*[a for a in args if not a.startswith("STEPDBG_")])
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr


def test_help_texts_answer_the_question():
    assert "--on-break ACTION" in stepdbg("--help").stdout
    assert "loss_spike>K" in stepdbg("--help-conditions").stdout
    assert stepdbg("--version").stdout.startswith("stepdbg 0.")
    assert "q asks what becomes of the job" in stepdbg("attach", "--help").stdout  # how to leave, asked first
    for command in (("torchrun", "--help"), ("overfit", "--help"), ("doctor", "--help"), ("attach", "--help")):
        text = stepdbg(*command).stdout
        # (lines folded at the terminal's width, a command's ` \` and a comment's, joined to theirs)
        block = re.sub(r" \\\n +| *\n {4,}", " ", text.split("examples:\n")[1].split("\n\n")[0])
        examples = block.splitlines()
        assert examples and all(line.startswith("  stepdbg ") for line in examples), text
        if command[0] == "torchrun":  # each example of torchrun's help runs torchrun
            assert all("torchrun " in line for line in examples), examples


def test_the_memory_census_leaves_torch_compiles_fake_tensors_alone():
    import warnings

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from stepdbg.agent.measure.census import storage_of

    with FakeTensorMode():
        fake = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's deprecation of a FakeTensor's data pointer
        assert storage_of(fake) is None


def test_report_has_start_and_end_with_versions(tmp_path, echo_script):
    report = tmp_path / "r.jsonl"
    out = stepdbg("--report", str(report), str(echo_script))
    assert out.returncode == 0
    events = [json.loads(line) for line in report.read_text().splitlines()]
    start, end = events[0], events[-1]
    import torch

    assert start["event"] == "start" and start["pid"] > 0 and start["torch"] == torch.__version__
    assert start["stepdbg"] and start["argv"][1:] == [str(echo_script)]
    assert end == {**end, "event": "end", "exit_code": 0, "steps": 0}


def test_non_finite_floats_are_written_as_strings(tmp_path):
    from stepdbg.agent.report import Report, read

    r = Report(str(tmp_path / "r.jsonl"))
    r.write("x", a=float("nan"), b=[float("inf"), -float("inf")], c={"d": 1.5})
    r.close()
    assert read(str(tmp_path / "r.jsonl")) == [{"event": "x", "a": "nan", "b": ["inf", "-inf"], "c": {"d": 1.5}}]


def test_an_interpreter_without_torch_is_told_in_one_line(tmp_path, echo_script):
    """`stepdbg python train.py` with a `python` that lacks torch (the venv not activated):
    one line naming that interpreter and what to do, exit code 2, no traceback."""
    env_dir = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    bare = env_dir / "bin" / "python"
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", str(bare), str(echo_script)],
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
    assert out.returncode == 2
    assert out.stderr.startswith(f"stepdbg: {bare} cannot import torch: run stepdbg with the interpreter")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("target", "expected"), [
    (["-m", "nosuch_mod"], "No module named nosuch_mod"),
    (["SYNTAX"], "SyntaxError: invalid syntax"),
])
def test_a_script_that_cannot_start_is_said_as_python_says_it(tmp_path, target, expected):
    """No break 'at <frozen runpy>' and no stepdbg traceback: Python's own words, the real
    file and line, exit code 1."""
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\ndef f(:\n    pass\n")
    args = [str(bad) if a == "SYNTAX" else a for a in target]
    out = stepdbg("--no-tui", sys.executable, *args)
    assert out.returncode == 1
    assert out.stderr.rstrip().endswith(expected) and "runpy" not in out.stderr and "break at" not in out.stderr
    if target == ["SYNTAX"]:
        assert out.stderr.startswith(f'  File "{bad}", line 2')


def test_a_fifo_as_the_report_is_refused_instead_of_hanging_the_start(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    out = stepdbg("--report", str(fifo), "demos/nan_log.py")  # a hang reaches WAIT; a busy machine may take 20 s
    assert out.returncode == 2 and "is not a regular file" in out.stderr


@pytest.mark.slow
def test_a_report_the_disk_refuses_is_switched_off_and_the_job_goes_on(tmp_path):
    """A full disk, as the job meets it: writes past a size limit fail (RLIMIT_FSIZE, with
    SIGXFSZ ignored, makes them fail with EFBIG)."""
    import resource
    import signal

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))

    report = tmp_path / "r.jsonl"
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--break", "every=1", "--report", str(report),
                          sys.executable, "tests/fixtures/train_loop.py", "--steps", "30"],
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL,
                         preexec_fn=small_files)
    assert out.returncode == 0, out.stderr
    assert "finished" in out.stdout  # every step ran
    said = [line for line in out.stderr.splitlines() if "cannot write the report" in line]
    assert len(said) == 1 and "it is off, the job goes on" in said[0], out.stderr
    assert "Traceback" not in out.stderr


def test_a_scripts_own_options_are_never_read_as_abbreviations_of_stepdbgs(echo_script):
    """argparse matched prefixes in the script's arguments: `--re` could match --report,
    --record-memory and the rewind options, and the launch failed."""
    out = stepdbg(str(echo_script), "--re", "--b", "--rep", "x")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["argv"][1:] == ["--re", "--b", "--rep", "x"], out.stdout


@pytest.mark.parametrize("given", [(), ("--on-break", "report"), ("--on-break", "skip")])
def test_a_break_that_goes_on_by_default_says_how_to_stop_there_and_a_skip_says_what_it_does(tmp_path, given):
    """A newcomer ran `stepdbg --no-tui train.py` and waited for a prompt that the default
    action (report) never gives; after `skip`, the script's own `loss nan` line read as if
    the skip had not happened."""
    run = run_stepdbg(tmp_path, "--no-tui", *given, script_args=(str(ROOT / "demos" / "nan_log.py"), "--steps", "32"))
    hint = "the job goes on: report is the default action; --on-break pause stops at a break"
    assert run.stderr.count(hint) == (0 if given else 1), run.stderr
    if "skip" in given:
        assert "change: step 30's update will be skipped: the parameters and the optimizer's state stay " \
               "as they are (the loss your script prints for step 30 is the one it computed, still the bad one)" \
               in run.stderr, run.stderr


def test_torchrun_given_by_path_gives_every_rank_an_agent(tmp_path):
    """`stepdbg ... .venv/bin/torchrun ...`: run as a script, the agent sat in torchrun's
    launcher and the ranks ran bare (no break at all); a path to torchrun is torchrun, with
    the interpreter its #! line names."""
    from stepdbg.cli.common import run_config
    from stepdbg.cli.run import command, run_parser

    torchrun = tmp_path / "bin" / "torchrun"
    torchrun.parent.mkdir()
    torchrun.write_text(f"#!{sys.executable}\nfrom torch.distributed.run import main\nmain()\n")
    cfg = run_config(run_parser(False).parse_args(
        ["--break", "nan", str(torchrun), "--standalone", "--nproc_per_node=2", "demos/ddp_nan.py", "--steps", "3"]))
    assert (cfg.torchrun, cfg.python, cfg.script) == (["--standalone", "--nproc_per_node=2"], sys.executable,
                                                      "demos/ddp_nan.py")
    assert command(cfg)[1:4] == ["-u", "-m", "torch.distributed.run"]  # (-u: torchrun's copies of the ranks' output as they come)


def test_stepdbg_python_without_a_script_says_what_is_missing():
    """`stepdbg python` alone names what to add (it said `got 'nothing'`; issue 45, item 10)."""
    out = stepdbg("python")
    assert out.returncode == 2
    assert "stepdbg: no script after python: stepdbg python train.py [ARGS], or stepdbg python -m MODULE [ARGS]" \
        in out.stderr, out.stderr
    assert "nothing" not in out.stderr


def test_stepdbg_python_without_a_script_names_the_word_typed(tmp_path):
    """The sixteenth walk's 18: with a `python` on the PATH that has no torch, stepdbg runs the
    script under its own interpreter, and `stepdbg python` alone said `no script after python3`."""
    import os

    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(os.path.realpath(sys._base_executable))  # (no venv: no torch)
    env = {**os.environ, "PATH": f"{bare}{os.pathsep}{os.environ['PATH']}"}
    script = Path(sys.executable).parent / "stepdbg"  # (as installed: its interpreter is the venv's python3)
    if not script.exists():
        pytest.skip("stepdbg is not installed beside this Python")
    out = subprocess.run([str(script), "python"], capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, stdin=subprocess.DEVNULL, env=env)
    assert out.returncode == 2 and "stepdbg: no script after python: " in out.stderr, out.stderr
