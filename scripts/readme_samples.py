"""The sample outputs of README.md and docs/*.md, made by running them: each block after a
line ``<!-- sample: NAME -->`` is what SAMPLES[NAME] prints, this checkout's path written as
CHECKOUT (the program prints a script's path absolute, as Python's tracebacks do: a sample that
left the checkout out said `at demos/nan_log.py:56`, which no run prints). A block may live in
any of those files (one block per name, in one file).

    python scripts/readme_samples.py           # run every sample and rewrite its block
    python scripts/readme_samples.py --check   # exit 1, with a diff, where a block drifted

tests/test_readme.py runs the check, so the documents' outputs are the program's.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MARK = re.compile(r"^<!-- sample: ([\w-]+) -->\n```\n(.*?)^```\n", re.M | re.S)
CHECKOUT = "/home/you/stepdbg"  # where the README's reader cloned it, in place of this checkout's path


@dataclass(frozen=True)
class Sample:
    command: str  # as a person types it, in the checkout, after `stepdbg` is on the PATH
    stdin: str = ""
    prompts: int = 0  # keep the output up to this console prompt (the commands typed before it)
    start: str = ""  # keep the output from the first line that starts with this ("..." before it)
    shown: bool = False  # the block starts with "$ COMMAND"
    then: str = ""  # a second command, run after the first in the checkout, shown as "$ THEN"
    cleanup: str = ""  # a glob of what the commands write in the checkout: removed before and after


SAMPLES = {
    "quickstart": Sample("stepdbg --no-tui --on-break replay --on-break pause python demos/nan_log.py",
                         stdin="info model\nq\n", prompts=2),
    "lr-explode": Sample("stepdbg --no-tui --break 'grad_norm>200' --on-break pause python demos/lr_explode.py",
                         stdin="lr 0.01 pin\nbreak rm grad_norm>200\n\n", shown=True),
    "skip-on-device": Sample("stepdbg --no-tui --skip-on-device --on-break replay python demos/nan_log.py --fused",
                             start="step 30 ", shown=True),
    "doctor": Sample("stepdbg doctor --steps 20 -q python demos/lr_explode.py", shown=True),
    "evidence": Sample("stepdbg --no-tui -q --break nan --on-break save --on-break skip python demos/nan_log.py",
                       shown=True, then="stepdbg replay stepdbg-step30", cleanup="stepdbg-step30*"),
    "transient": Sample("stepdbg --no-tui --break nan --on-break replay --on-break skip python demos/transient_fault.py",
                        shown=True),
    "diff": Sample('stepdbg diff "python tests/fixtures/diff_blocks.py --eps2 1e-5" '
                   '"python tests/fixtures/diff_blocks.py --eps2 1e-1"', shown=True,
                   then='stepdbg diff --steps 2 "python tests/fixtures/diff_dropout.py" '
                        '"python tests/fixtures/diff_dropout.py"'),
}


def run(sample: Sample) -> str:
    """What a person sees: the command's output, then the second command's, if any."""
    for path in ROOT.glob(sample.cleanup) if sample.cleanup else ():
        shutil.rmtree(path)
    try:
        out = run_one(sample)
        return out + (run_one(Sample(sample.then, shown=sample.shown)) if sample.then else "")
    finally:
        for path in ROOT.glob(sample.cleanup) if sample.cleanup else ():
            shutil.rmtree(path)


def run_one(sample: Sample) -> str:
    """What a person sees: stdout and stderr as they come, this checkout's path as CHECKOUT."""
    argv = shlex.split(sample.command)  # (stepdbg diff takes each command line in one argument)
    argv = [sys.executable, "-m", "stepdbg", *argv[1:]]
    argv = [sys.executable if a == "python" else a for a in argv]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "100", "STEPDBG_CONSOLE": "1" if sample.stdin else "0",
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}  # `python` in them
    env.pop("STEPDBG_DEFER_READS", None)
    out = subprocess.run(argv, input=sample.stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         cwd=ROOT, env=env, timeout=300).stdout
    out = re.sub(re.escape(str(ROOT)) + r"(?![\w.-])", CHECKOUT, out)  # (not a longer name that starts with it)
    at = 0
    for typed in sample.stdin.splitlines():  # what a terminal echoes after each prompt
        at = out.find("(stepdbg) ", at)
        if at < 0:
            break
        at += len("(stepdbg) ")
        out = f"{out[:at]}{typed}\n{out[at:]}"
    if sample.prompts:
        at = -1
        for _ in range(sample.prompts):
            at = out.index("(stepdbg) ", at + 1)
        out = out[:at] + "(stepdbg)\n"
    if sample.start:
        lines = out.splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if line.startswith(sample.start))
        out = "".join(["...\n"] * (first > 0) + lines[first:])
    lines = [line.rstrip() for line in out.splitlines()]
    head = [f"$ {sample.command}"] if sample.shown else []
    return "\n".join(head + lines) + "\n"


def blocks(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in MARK.finditer(text)}


def documents() -> list[Path]:
    """Where sample blocks may live: the README and every page under docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def shown() -> dict[str, tuple[Path, str]]:
    """Each sample block by name: the file that holds it and its text. A name in two places is an error."""
    found: dict[str, tuple[Path, str]] = {}
    for path in documents():
        for name, block in blocks(path.read_text()).items():
            if name in found:
                raise ValueError(f"sample {name!r} is in both {found[name][0].relative_to(ROOT)} "
                                 f"and {path.relative_to(ROOT)}: keep one")
            found[name] = (path, block)
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare, rewrite nothing; exit 1 where a block drifted")
    p.add_argument("names", nargs="*", help="only these samples (default: every one)")
    args = p.parse_args()
    found = shown()
    missing = set(SAMPLES) - set(found)
    if missing:
        print(f"README.md and docs/*.md have no block for {sorted(missing)}", file=sys.stderr)
        return 2
    drifted = 0
    for name in args.names or list(SAMPLES):
        print(f"running {name}: {SAMPLES[name].command}", file=sys.stderr, flush=True)
        path, block = found[name]
        new = run(SAMPLES[name])
        if new == block:
            continue
        drifted += 1
        where = path.relative_to(ROOT)
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(block.splitlines(True), new.splitlines(True),
                                                       f"{where} ({name})", f"{name} as run now"))
        else:
            text = path.read_text()
            path.write_text(text.replace(f"<!-- sample: {name} -->\n```\n{block}```\n",
                                         f"<!-- sample: {name} -->\n```\n{new}```\n"))
    return 1 if drifted and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
