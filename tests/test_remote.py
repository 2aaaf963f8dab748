"""Remote attach through a real sshd on 127.0.0.1, with keys the test makes.

Skipped when openssh-server is not installed (.ci/run installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT, SHORT, WAIT

from stepdbg import client
from stepdbg.client import TargetError

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists(SSHD) or shutil.which("ssh") is None,
                                 reason="needs openssh-server and the ssh client"),
              pytest.mark.usefixtures("private_runtime_dir")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sshd(tmp_path, monkeypatch, private_runtime_dir):  # noqa: F811
    """A real sshd on 127.0.0.1 that accepts one generated key; ssh is pointed at it via STEPDBG_SSH."""
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    shutil.copy(d / "user_key.pub", d / "authorized_keys")
    port = free_port()
    env_file = d / "environment"
    # The remote side must find the same runtime dir and stepdbg as the test.
    env_file.write_text(f"STEPDBG_RUNTIME_DIR={private_runtime_dir}\n")
    (d / "sshd_config").write_text(f"""
Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
PermitUserEnvironment yes
AllowStreamLocalForwarding yes
AllowTcpForwarding yes
AcceptEnv STEPDBG_RUNTIME_DIR
""")
    os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    (d / "ssh_config").write_text(f"""
Host testnode
    HostName 127.0.0.1
    Port {port}
Host *
    User {user}
    IdentityFile {d / 'user_key'}
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    BatchMode yes
""")
    monkeypatch.setenv("STEPDBG_SSH", f"ssh -F {d / 'ssh_config'}")
    monkeypatch.setenv("STEPDBG_REMOTE", f"env STEPDBG_RUNTIME_DIR={private_runtime_dir} {sys.executable} -m stepdbg")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    yield {"port": port, "user": user, "dir": d}
    proc.terminate()
    proc.wait(WAIT)  # (5 s: a ceiling a busy machine may reach; a TimeoutExpired in teardown is an error)


def test_attach_over_ssh_pause_eval_and_continue(sshd, start_job):  # noqa: F811
    job = start_job("--break", "step==2", script_args=("--steps", "4"))
    info = job.info()
    with client.connect(f"ssh://testnode/{info.id}") as c:
        brk = c.wait_paused(WAIT)
        assert brk["step"] == 2
        assert c.evaluate("step")["value"] == "2"
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0


def test_ls_and_attach_over_ssh_from_the_cli(sshd, start_job):  # noqa: F811
    job = start_job("--break", "step==1", script_args=("--steps", "3"))
    info = job.info()
    env = {**os.environ}
    ls = subprocess.run([sys.executable, "-m", "stepdbg", "ls", "ssh://testnode"], capture_output=True,
                        text=True, timeout=WAIT, env=env)
    assert ls.returncode == 0, ls.stderr
    assert str(info.pid) in ls.stdout and "train_loop.py" in ls.stdout
    with client.connect(f"ssh://{sshd['user']}@127.0.0.1:{sshd['port']}") as watcher:  # the only session
        watcher.wait_paused(WAIT)
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "ssh://testnode"], input="p x\ndetach\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT, env=env)
        assert out.returncode == 0, out.stderr
        assert "paused at step 1" in out.stderr and "x: float32 [8, 4] on cpu" in out.stderr
        # coming back is over ssh too (it said `stepdbg attach ID`, which looks on this machine)
        assert f"the job stays paused: `stepdbg attach ssh://testnode/{info.id}` comes back" in out.stderr
        watcher.cont()
        assert watcher.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0


def test_a_job_whose_socket_path_is_too_long_for_sshd_is_attached_over_ssh(sshd, start_job, monkeypatch):  # noqa: F811
    """sshd forwards to a socket by its own path, which a socket address cannot hold past
    about 104 bytes: the remote `ls` gives it a short alias (issue 47)."""
    base = str(sshd["dir"].parent / "r")
    deep = base + "/" + "d" * (200 - len(base) - 1)
    os.makedirs(os.path.dirname(deep), exist_ok=True)
    monkeypatch.setenv("STEPDBG_RUNTIME_DIR", deep)
    monkeypatch.setenv("STEPDBG_REMOTE", f"env STEPDBG_RUNTIME_DIR={deep} {sys.executable} -m stepdbg")
    job = start_job("--break", "step==2", script_args=("--steps", "4"))
    info = job.info()
    assert len(os.fsencode(info.local)) > 104, info.local
    with client.connect(f"ssh://testnode/{info.id}") as c:
        assert c.wait_paused(WAIT)["step"] == 2
        assert c.evaluate("step")["value"] == "2"
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    assert job.finish()[0] == 0


def test_ssh_failures_say_what_went_wrong(sshd, monkeypatch, tmp_path):
    with pytest.raises(TargetError, match="no stepdbg session is running on testnode"):
        client.connect("ssh://testnode")
    with pytest.raises(TargetError, match="no session '4242' on testnode"):
        client.connect("ssh://testnode/4242")
    with pytest.raises(TargetError, match=r"cannot reach .* over ssh"):
        client.connect(f"ssh://127.0.0.1:{free_port()}")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    cfg = (sshd["dir"] / "ssh_config").read_text().replace(str(sshd["dir"] / "user_key"), str(other))
    (tmp_path / "bad_config").write_text(cfg)
    monkeypatch.setenv("STEPDBG_SSH", f"ssh -F {tmp_path / 'bad_config'}")
    with pytest.raises(TargetError, match="refused the login"):
        client.connect("ssh://testnode")
    monkeypatch.setenv("STEPDBG_SSH", f"ssh -F {sshd['dir'] / 'ssh_config'}")
    monkeypatch.setenv("STEPDBG_REMOTE", "stepdbg-not-installed-here")
    with pytest.raises(TargetError, match="stepdbg is not installed on testnode"):
        client.connect("ssh://testnode")
    with pytest.raises(TargetError, match="is not ssh://"):
        client.connect("ssh://")
    liar = tmp_path / "liar.py"  # a remote 'stepdbg ls --json' that answers nonsense
    for answer, said in [('{"rows": 1}', "a dict, not a list"), ('["x"]', "row 1: a session is an object"),
                         ('[{"id": "1", "pid": "abc", "host": "h", "argv": [], "address": "/s.sock", "token": "t",'
                          ' "started": 0}]', "row 1: pid is 'abc'")]:
        liar.write_text(f"print({answer!r})\n")
        monkeypatch.setenv("STEPDBG_REMOTE", f"{sys.executable} {liar}")
        with pytest.raises(TargetError, match=f"answered nonsense.*{re.escape(said)}"):
            client.connect("ssh://testnode")
    monkeypatch.setenv("STEPDBG_SSH", "")
    with pytest.raises(TargetError, match="STEPDBG_SSH is empty"):
        client.connect("ssh://testnode")


def test_attach_a_whole_torchrun_job_over_ssh(sshd, tmp_path):
    """Both ranks of a torchrun job, reached through one ssh connection: the job console
    lists both, continues both, and the job ends with code 0."""
    from test_ranks import FIXTURE as DDP

    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "-q", "--break", "step==2", "torchrun",
                             "--standalone", "--nproc_per_node=2", str(DDP)], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from stepdbg.wire import sessions

        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        job = sessions.listing()[0].job_id
        watchers = client.connect_job(job)  # attach once both ranks are paused, not before
        for w in watchers:
            w.wait_paused(WAIT)
            w.close()
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", f"ssh://testnode/{job}"],
                             input="ranks\nc\n", capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert f"attached to job {job}: 2 ranks" in out.stderr
        assert "rank 1: paused" in out.stderr.replace("* rank", "  rank")
        stdout, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0 and stdout.count("finished") == 2, stderr[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_job_started_with_the_environment_variable_is_attached_as_a_whole_over_ssh(sshd, tmp_path):
    """`stepdbg hook install` + STEPDBG_AUTOSTART: plain torchrun, no stepdbg on its command
    line; both ranks are attached through the sshd, pause together, and go on to exit 0."""
    import os

    from test_ranks import FIXTURE as DDP

    from stepdbg.cli.attach import open_job

    subprocess.run([sys.executable, "-m", "stepdbg", "hook", "install"], check=True, capture_output=True)
    try:
        env = {**os.environ, "STEPDBG_AUTOSTART": "step==12", "STEPDBG_QUIET": "1"}
        # The break only pauses a job a client is attached to: the ranks start their steps once
        # the job is attached (rank 1 waits for the go file before step 0, rank 0 for rank 1).
        # (Steps of 0.2 s could reach step 12 before a busy machine's ssh attach got in.)
        go = tmp_path / "go"
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                                 str(DDP), "--steps", "30", "--stall-at", "0", "--stall-until", str(go)],
                                cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            from stepdbg.wire import sessions

            deadline = time.monotonic() + WAIT
            while len([s for s in sessions.listing() if s.job_id]) < 2:
                assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            job = open_job(f"ssh://testnode/{sessions.listing()[0].job_id}")
            assert job is not None and len(job.clients) == 2
            go.touch()
            for c in job.clients:
                brk = c.wait_paused(WAIT)
                assert (brk["step"], brk["phase"]) == (12, "before_optimizer_step")
            assert {row["state"] for row in job.rank_table()} == {"paused"}
            job.cont()
            for c in job.clients:  # started in-process: the agent says goodbye, exit code unknown to it
                assert "lost" not in c.wait_exited(WAIT)
            job.close()
            out, err = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0 and out.count("finished") == 2, err[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        subprocess.run([sys.executable, "-m", "stepdbg", "hook", "remove"], check=True, capture_output=True)


def fake_slurm(bin_dir, job: str, state: str, nodelist: str, hostnames: list[str]) -> None:
    """squeue and scontrol as SLURM answers for one job (there is no SLURM here)."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "squeue").write_text(f'#!/bin/sh\ncase "$*" in *"-j {job} "*) echo "{state} {nodelist}";; esac\n')
    (bin_dir / "scontrol").write_text("#!/bin/sh\n" + "".join(f"echo {h}\n" for h in hostnames))
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def test_slurm_targets_say_what_is_wrong(tmp_path, monkeypatch):
    from stepdbg.cli.attach import open_job

    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    fake_slurm(tmp_path / "bin", "4242", "PENDING", "(Resources)", [])
    for target, words in (("slurm:4242", "SLURM job 4242 is pending: no node runs it yet"),
                          ("slurm:77", "SLURM job 77 is not in the queue"),
                          ("slurm:-oProxyCommand=x", "is not a SLURM job id")):
        with pytest.raises(TargetError, match=words):
            open_job(target)


@pytest.mark.parametrize("name", ["mallory@node1", "node1:2222", "-oProxyCommand=touch_x"])
def test_a_node_name_from_slurm_is_never_an_ssh_user_port_or_option(tmp_path, monkeypatch, name):
    """scontrol's node names went into an ssh:// URL: 'mallory@node1' became the ssh user,
    'node1:2222' a port. They are checked as the names from the job's store are."""
    from stepdbg.cli.attach import open_job

    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    fake_slurm(tmp_path / "bin", "4242", "RUNNING", "node1", [name])
    with pytest.raises(TargetError, match="which is not a host name; refusing to pass it to ssh"):
        open_job("slurm:4242")


def test_slurms_own_words_reach_the_terminal_without_their_escape_sequences(tmp_path, monkeypatch):
    from stepdbg.cli.attach import open_job

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\nprintf 'squeue: error: \\033]0;owned\\007Invalid \\033[2Jjob id\\n' >&2\n"
                                    "exit 1\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(TargetError) as e:
        open_job("slurm:4242")
    assert "squeue: error: Invalid job id" in str(e.value) and "\x1b" not in str(e.value) and "\x07" not in str(e.value)


def test_a_job_on_two_nodes_is_attached_through_ssh_to_each_node(sshd, tmp_path, monkeypatch):
    """Two "nodes" on this machine: two torchrun agents (--nnodes=2, one rank each) whose
    ranks keep their session files apart, as two machines would, and ssh reaches them as
    nodeA and nodeB (one sshd; each alias sends its own runtime dir). Attaching to
    slurm:4242 asks squeue and scontrol for the job's nodes (fakes: no SLURM here), finds
    the only job on nodeA over ssh and rank 1 on nodeB from the node names the ranks put
    in the job's store, opens a tunnel to each node, and pauses and continues the whole job."""
    from test_ranks import FIXTURE as DDP

    from stepdbg.cli.attach import open_job

    # Each node's runtime folder is where sshd forwards to: a socket path sshd must fit (a deep tmp_path)
    base = tmp_path if len(str(tmp_path)) < SHORT else Path(tempfile.mkdtemp(prefix="nodes-"))
    port, dirs = free_port(), {n: base / n for n in ("nodeA", "nodeB")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    cfg = tmp_path / "two_nodes_ssh_config"
    cfg.write_text("".join(f"Host {n}\n    HostName 127.0.0.1\n    Port {sshd['port']}\n    SetEnv STEPDBG_RUNTIME_DIR={d}\n"
                           for n, d in dirs.items()) + (sshd["dir"] / "ssh_config").read_text())
    monkeypatch.setenv("STEPDBG_SSH", f"ssh -F {cfg}")
    monkeypatch.setenv("STEPDBG_REMOTE", f"{sys.executable} -m stepdbg")
    fake_slurm(tmp_path / "bin", "4242", "RUNNING", "node[A-B]", ["nodeA", "nodeB"])
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    procs = [subprocess.Popen(
        [sys.executable, "-m", "stepdbg", "serve", "-q", "--break", "step==3", "torchrun", "--nnodes=2",
         f"--node_rank={i}", "--nproc_per_node=1", "--rdzv-id=twonodes", "--master_addr=127.0.0.1",
         f"--master_port={port}", str(DDP), "--steps", "8"],
        cwd=ROOT, env={**os.environ, "STEPDBG_RUNTIME_DIR": str(d), "STEPDBG_NODE": n},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, (n, d) in enumerate(dirs.items())]
    job = None
    try:
        deadline = time.monotonic() + WAIT
        while job is None:  # rank 1's node is known once the process group exists
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            try:
                job = open_job("slurm:4242")
            except TargetError as e:
                assert "not found" in str(e) or "no session" in str(e) or "no stepdbg session" in str(e), e
                time.sleep(0.5)
        assert job is not None and [c.session["host"] for c in job.clients] == ["nodeA", "nodeB"]
        for c in job.clients:
            brk = c.wait_paused(WAIT)
            assert (brk["step"], brk["phase"]) == (3, "before_optimizer_step")
        assert [(r["rank"], r["state"]) for r in job.rank_table()] == [(0, "paused"), (1, "paused")]
        assert job.compare("dist.get_rank()") == [(0, "0"), (1, "1")]
        job.cont()
        for c in job.clients:
            assert c.wait_exited(WAIT)["exit_code"] == 0
    finally:
        if job is not None:
            job.close()
        for p in procs:
            if job is None:
                p.kill()
        outs = [p.communicate(timeout=WAIT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-1500:] for _, err in outs]


def test_ls_columns_line_up_whatever_the_widths():
    from stepdbg.client.targets import format_listing
    from stepdbg.wire.sessions import SessionInfo

    rows = [SessionInfo("s1", 1234, "node17", ["python", "train.py", "--lr"], "/s", "t", 0.0),
            SessionInfo("a1b2c3d4e5f6-r1", 77, "gpu-node-0123.cluster.example", ["python", "-m", "pkg.train"], "/s",
                        "t", 0.0, rank=1, world_size=8)]
    head, one, two = format_listing(rows).splitlines()
    assert head.index("PID") == one.index("1234") == two.index("77") == 17
    assert head.index("RANK") == two.index("1/8") and head.index("SCRIPT") == one.index("train.py")
    assert two.endswith("-m pkg.train") and one.endswith("train.py --lr")
    head, one, _ = format_listing(rows, [("STEP", ["3", "120"]), ("STATE", ["paused", "in collective"])]).splitlines()
    assert one[head.index("STEP"):].startswith("3 ") and one[head.index("STATE"):].startswith("paused ")
    assert head.index("SCRIPT") == one.index("train.py")  # lined up, the command last and whole

def test_ls_names_a_job_once_with_its_nodes():
    from stepdbg.client.targets import job_lines
    from stepdbg.wire.sessions import SessionInfo

    rows = [SessionInfo(f"twonodes-r{r}", 100 + r, "nodeA" if r < 2 else "nodeB", ["python", "train.py"], "/s", "t",
                        0.0, rank=r, world_size=4, job_id="twonodes") for r in range(4)]
    rows.append(SessionInfo("solo", 7, "nodeA", ["python", "eval.py"], "/s", "t", 0.0))
    assert job_lines(rows) == ["job twonodes: 4 of 4 ranks, on nodeA (ranks 0,1), nodeB (ranks 2,3) · "
                               "stepdbg attach twonodes"]
