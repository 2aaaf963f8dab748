"""`stepdbg diff --keep-records DIR` keeps each run's record; a kept record given as A or B
is compared with no run (a baseline kept once, compared with later runs or again with a
tolerance). A kept record is a file anyone could hand over: whatever it is, one line and
exit 2, never a traceback, never a hang on a FIFO; a record already in DIR is never
overwritten; a keep that fails leaves nothing. Real runs of tests/fixtures/diff_blocks.py."""

from __future__ import annotations

import json
import os
import stat

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_diff import diff, line

from stepdbg.cli.diff_records import MAX_RECORD_BYTES, RecordUnusable, keep, keep_folder, read_kept

HEADER = {"kind": "header", "version": 1, "steps": 1, "max_calls": 4096}
ENTRY = {"step": 0, "phase": "forward", "module": "fc", "what": "output", "call": 0,
         "fp": {"shape": [2], "dtype": "float32", "hash": "ab", "stats": [1.0, 2.0], "samples": [0.5]}}


def one_line_and_2(r, said: str) -> None:
    """Refused as the CLI refuses: exit 2, its last line says why, no traceback, no run."""
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert said in r.stderr.strip().splitlines()[-1], r.stderr
    assert "Traceback" not in r.stderr and "running A" not in r.stderr and "running B" not in r.stderr


def test_a_record_already_kept_is_never_overwritten(tmp_path):
    """(Kept records compared again, with a tolerance, against a new run: test_diff's
    test_unseeded_noise, whose runs keep theirs.)"""
    kept = tmp_path / "runs"
    kept.mkdir()
    (kept / "B.jsonl").write_text("theirs")
    a = line("diff_blocks.py")
    one_line_and_2(diff("--keep-records", str(kept), a, a), "B.jsonl is there already")
    assert sorted(os.listdir(kept)) == ["B.jsonl"] and (kept / "B.jsonl").read_text() == "theirs"


def records(folder, name: str, *lines: object) -> str:
    path = folder / name
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


def kept(folder, name: str = "good.jsonl", header: dict = HEADER, step: int = 0, **change: object) -> str:
    """A record of one step holding one fingerprint entry, `change` made to the entry (fp.X: its fingerprint's)."""
    entry = {**ENTRY, "step": step, "fp": dict(ENTRY["fp"])}
    for key, value in change.items():
        (entry["fp"] if key.startswith("fp_") else entry)[key.removeprefix("fp_")] = value
    return records(folder, name, header, entry, {"kind": "step", "step": step, "capped": 0}, {"kind": "end"})


def test_a_kept_record_that_cannot_be_compared_is_one_line(tmp_path):
    g = kept(tmp_path)
    (tmp_path / "dir.jsonl").mkdir()
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "dev.jsonl").symlink_to("/dev/zero")
    (tmp_path / "junk.jsonl").write_bytes(b"\x00\xff not json\n")
    with open(tmp_path / "huge.jsonl", "wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)  # (sparse: no disk)
    bundle = kept(tmp_path, "bundle.jsonl", {**HEADER, "bundle": "/b"})
    not_written = "is not a record stepdbg diff wrote"
    for a, said in [(tmp_path / "gone.jsonl", "A: no record at"), (tmp_path / "dir.jsonl", "is not a file"),
                    (tmp_path / "fifo.jsonl", "is not a file"), (tmp_path / "dev.jsonl", "is not a file"),
                    (tmp_path / "junk.jsonl", f"{not_written} (line 1 is not JSON)"),
                    (tmp_path / "huge.jsonl", f"over the {MAX_RECORD_BYTES:,} a record may have"),
                    (bundle, "compare a bundle with a bundle"),
                    # (the attacker's: each was a wrong "agree", a traceback with exit 1, or a forged line)
                    (kept(tmp_path, "seven.jsonl", step=7), "A's record holds no fingerprint of step 0"),
                    (records(tmp_path, "empty.jsonl", HEADER, {"kind": "step", "step": 0}),
                     "A's record holds no fingerprint of step 0"),
                    (records(tmp_path, "capped.jsonl", HEADER, {"kind": "step", "step": 0, "capped": "x"}),
                     f"{not_written} (line 2: a step's counts are not counts)"),
                    (kept(tmp_path, "big.jsonl", fp_stats=[10**400]), "a fingerprint's numbers are not numbers"),
                    (kept(tmp_path, "bigv.jsonl", fp_value=10**400), "a fingerprint's value is not a number"),
                    (kept(tmp_path, "file.jsonl", file=5), f"{not_written} (line 2 is not a fingerprint entry)"),
                    (records(tmp_path, "nan.jsonl", HEADER, '{"step": 0, "fp": {}, "line": NaN}'),
                     "call or line is not a number"),
                    (kept(tmp_path, "v2.jsonl", {**HEADER, "version": 2}), "its format is 2, this stepdbg reads 1")]:
        one_line_and_2(diff(str(a), g), said)
    one_line_and_2(diff("--steps", "3", g, g), "A's record holds 1 training step of the 3 asked (--steps 3)")
    one_line_and_2(diff("--model", "m:f", g, g), "--model is for bundles")
    one_line_and_2(diff("--keep-records", str(tmp_path / "k"), g, g), "A and B are kept records already")
    one_line_and_2(diff("--keep-records", "", g, line("diff_blocks.py")), "--keep-records needs a folder")
    five = kept(tmp_path, "five.jsonl", {**HEADER, "max_calls": 5})
    one_line_and_2(diff(g, five), "A was recorded with --max-calls 4096, B with 5")
    one_line_and_2(diff("--max-calls", "5", g, line("diff_blocks.py")), "made with --max-calls 4096")
    spaced = tmp_path / "my runs" / "A.jsonl"
    spaced.parent.mkdir()
    spaced.write_text("no")
    one_line_and_2(diff(str(spaced), g), f"A: {spaced} {not_written}")
    (tmp_path / "file").write_text("")
    one_line_and_2(diff("--keep-records", str(tmp_path / "file"), g, line("diff_blocks.py")), "is not a folder")
    # A record misnamed is never run as a script (this one is Python too: it would write RAN).
    handed = records(tmp_path, "handed.json", "{}", "open('RAN', 'w').close()")
    one_line_and_2(diff(handed, g, cwd=tmp_path), "holds JSON, not a script to run")
    assert not (tmp_path / "RAN").exists()
    r = diff(g + " ", g)  # (a stray space after the name: the record still)
    assert r.returncode == 0 and r.stdout.startswith("the runs agree: 1 step, 1 fingerprints each"), r.stderr


def test_a_records_words_never_reach_the_terminal_as_control_characters(tmp_path):
    """A record's text (an entry's file, the recorder's error) held a newline that forged
    'the runs agree' on a line of its own, and a terminal escape."""
    g = kept(tmp_path)
    forged = "x.py\n\x1b[2Kthe runs agree: 1 step, no difference\n"
    r = diff(kept(tmp_path, "a.jsonl", file=forged, line=3), kept(tmp_path, "b.jsonl", fp_hash="other"))
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 4 and "\x1b" not in r.stdout, r.stdout
    assert r.stdout.startswith("first divergence: step 0") and "x.py\\x0a\\x1b[2Kthe runs agree" in r.stdout
    failed = records(tmp_path, "err.jsonl", HEADER, {**ENTRY}, {"kind": "step", "step": 0},
                     {"kind": "end", "error": "boom\nstepdbg diff: the runs agree\n\x1b[31mRED"})
    r = diff(g, failed)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "\x1b" not in r.stderr, r.stderr
    assert "the fingerprint recorder failed inside the job (boom\\x0astepdbg diff" in r.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
                          st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                                       lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                                           max_size=4),
                                       max_leaves=12).map(json.dumps)), max_size=6))
def test_whatever_a_kept_record_holds_it_is_read_or_refused_in_words(tmp_path, lines):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([json.dumps(HEADER), *lines]) + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        read_kept("A", str(path))
    except RecordUnusable as e:
        assert str(e).startswith(f"A: {path} ") and "\n" not in str(e)


def test_a_keep_that_fails_leaves_nothing_and_says_why(tmp_path):
    keeper = keep_folder(str(tmp_path / "k"), ["A"])
    said = keep("A", str(tmp_path / "gone.jsonl"), keeper)
    assert said.startswith("A's record was not kept (No such file or directory)") and os.listdir(keeper.path) == []
    (tmp_path / "k" / "A.jsonl").write_text("theirs")
    rec = tmp_path / "rec"
    rec.write_text("mine")
    assert "was not kept (File exists)" in keep("A", str(rec), keeper)
    assert (tmp_path / "k" / "A.jsonl").read_text() == "theirs" and os.listdir(tmp_path / "k") == ["A.jsonl"]
    # The folder swapped for a link to another while the runs ran: the record goes where it was opened.
    os.rename(tmp_path / "k", tmp_path / "k2")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "k").symlink_to(tmp_path / "elsewhere")
    assert keep("B", str(rec), keeper).startswith("B's record kept: ")
    assert os.listdir(tmp_path / "elsewhere") == [] and (tmp_path / "k2" / "B.jsonl").read_text() == "mine"
    assert stat.S_IMODE((tmp_path / "k2").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "k2" / "B.jsonl").stat().st_mode) == 0o600
    keeper.close()
