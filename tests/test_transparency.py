"""stepdbg is invisible to the program it watches (DESIGN, invisible to the program).

One script does what programs do with their own model (tests/fixtures/transparency.py:
torch.save and a load where stepdbg is not importable, deepcopy, AveragedModel and EMA,
jit.trace, export, compile with fullgraph, user hooks before and after stepdbg knows the
model, a spawn child, del and gc). It runs plain and under stepdbg in three modes: what it
prints, its exit code and the files it writes must be the same."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, WAIT

pytestmark = pytest.mark.slow  # real processes end to end (see pyproject: slow)

SCRIPT = ROOT / "tests" / "fixtures" / "transparency.py"


def run(out: Path, *stepdbg_args: str) -> subprocess.CompletedProcess[str]:
    prefix = [sys.executable, "-m", "stepdbg", "--no-tui", "--quiet", *stepdbg_args] if stepdbg_args else []
    return subprocess.run([*prefix, sys.executable, str(SCRIPT), str(out)], capture_output=True,
                          text=True, timeout=WAIT, cwd=ROOT, stdin=subprocess.DEVNULL)


def archive(path: Path) -> dict[str, bytes]:
    """A torch file's records. TorchScript's debug records hold the Python stack at trace
    time, which under a launcher has the launcher's frames: those are left out."""
    with zipfile.ZipFile(path) as z:
        return {n.split("/", 1)[1]: z.read(n) for n in z.namelist()
                if not n.endswith((".debug_pkl", "serialization_id"))}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The plain run, once for the whole run: near the suite's end xdist hands out tests two
    at a time, and each worker given one of the cases ran the script plain again (its setup,
    11 s alone, took 48 s of a loaded suite). The first worker runs it; the others wait for
    it and read what it printed (no path in it) and the files it wrote."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # a worker's base: the run's popen-gwN
    out, saved = shared / "transparency-plain", shared / "transparency-plain.json"
    with open(shared / "transparency-plain.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            proc = run(out)
            saved.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
    code, stdout, stderr = json.loads(saved.read_text())
    assert code == 0, stderr
    return subprocess.CompletedProcess([], code, stdout, stderr), out


@pytest.mark.parametrize("mode", [("--break", "nan"), ("--keep-every", "2"), ("--break", "activations")],
                         ids=["default", "keep-every", "activations"])
def test_the_program_does_the_same_under_stepdbg(plain, tmp_path: Path, mode: tuple[str, ...]) -> None:
    expected, plain_out = plain
    got = run(tmp_path, *mode)
    assert got.returncode == expected.returncode, got.stderr
    assert got.stdout == expected.stdout
    assert got.stderr == expected.stderr
    assert "model freed: True" in got.stdout and "stepdbg in checkpoint: False" in got.stdout
    assert "load in a fresh interpreter: loaded Net" in got.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in plain_out.iterdir())
    for name in ("model.pt", "state.pt", "opt.pt"):  # checkpoints: byte for byte
        assert (tmp_path / name).read_bytes() == (plain_out / name).read_bytes(), name
        assert b"stepdbg" not in (tmp_path / name).read_bytes()
    assert archive(tmp_path / "traced.pt") == archive(plain_out / "traced.pt")


WARNS = Path(__file__).parent / "fixtures" / "warns_once.py"


@pytest.mark.parametrize("args", [(), ("--no-tui", "--break", "nan", "--on-break", "replay"),
                                  ("doctor", "--steps", "10")])
def test_a_warning_python_shows_once_is_shown_once_under_stepdbg(args):
    """catch_warnings() in a replay or a census reset every module's once-registry: the
    job's own once-only warning was shown again after each (7 times under doctor)."""
    cmd = [sys.executable, "-m", "stepdbg", *args, sys.executable, str(WARNS)] if args else \
        [sys.executable, str(WARNS)]
    got = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert "done" in got.stdout and got.stderr.count("UserWarning: shown once, as Python does") == 1, got.stderr


@pytest.mark.parametrize("typed", ["./names.py", "names.py"])
def test_argv0_and_file_are_what_python_makes_them(tmp_path, typed):
    """runpy.run_path(abspath) made sys.argv[0] absolute (minGPT writes argv to args.txt) and
    normalised __file__ ('./x.py'); the traceback names the file as Python does too."""
    (tmp_path / "names.py").write_text("import sys\nprint(sys.argv[0], __file__, __name__, __spec__)\n"
                                       "raise SystemExit(sys.argv[1:] == ['--k', 'v'] and 7)\n")

    def out(*prefix: str) -> tuple[int, str]:
        got = subprocess.run([*prefix, sys.executable, typed, "--k", "v"], capture_output=True, text=True,
                             cwd=tmp_path, timeout=WAIT, stdin=subprocess.DEVNULL)
        return got.returncode, got.stdout

    assert out(sys.executable, "-m", "stepdbg", "--no-tui", "-q") == out() == (
        7, f"{typed} {os.path.join(str(tmp_path), typed)} __main__ None\n")
