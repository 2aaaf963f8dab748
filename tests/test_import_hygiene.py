"""The import boundary, proven in clean interpreters (STYLE.md example 5)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "textual", "rich", "prompt_toolkit")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("code", [
    "import stepdbg",
    "import stepdbg.wire.conditions, stepdbg.agent.report, stepdbg.cli",
    "import stepdbg.wire.protocol, stepdbg.client, stepdbg.client.async_client, stepdbg.client.remote, stepdbg.wire.sessions",
    "import stepdbg.client.console, stepdbg.cli.attach",
])
def test_the_facade_and_the_light_modules_load_nothing_heavy(code):
    assert loaded_after(code) == []


def test_the_front_end_package_never_loads_torch():
    assert "torch" not in loaded_after("import stepdbg_tui.app, stepdbg_tui.launch, stepdbg_tui.repl")


def test_stepdbg_help_answers_without_torch():
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: stepdbg" in out.stdout


def test_no_module_imports_itself_round_a_circle():
    """Type-only and function-level imports count: a circle is a circle (grimp, import-linter's graph)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("stepdbg", "stepdbg_tui", cache_dir=None)
    modules = set(graph.modules)
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    done: set[str] = set()

    def circle_from(m: str, path: list[str]) -> list[str] | None:
        if m in path:
            return path[path.index(m):] + [m]
        if m in done:
            return None
        for n in sorted(imports[m]):
            found = circle_from(n, [*path, m])
            if found:
                return found
        done.add(m)
        return None

    for m in sorted(modules):
        circle = circle_from(m, [])
        assert circle is None, " -> ".join(circle)


def test_no_module_of_ours_imports_a_private_name_of_another():
    """A name shared between modules is public: `from .commands import _out` hid a shared
    helper behind an underscore (issue 47), and so would `commands._last_stepping` after
    `from . import commands`. Names of other packages (torch._utils) are theirs."""
    import ast
    from pathlib import Path

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    root = Path(__file__).resolve().parent.parent
    found = []
    for file in [*root.joinpath("stepdbg").rglob("*.py"), *root.joinpath("tui").rglob("*.py")]:
        tree = ast.parse(file.read_text(), str(file))
        ours: set[str] = set()  # the names this file binds to one of our modules (or their names)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0]
                                                     in ("stepdbg", "stepdbg_tui")):
                found += [f"{file.relative_to(root)}:{node.lineno} {a.name}" for a in node.names if private(a.name)]
                ours |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                ours |= {a.asname or a.name.split(".")[0] for a in node.names
                         if a.name.split(".")[0] in ("stepdbg", "stepdbg_tui")}
        found += [f"{file.relative_to(root)}:{node.lineno} {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ours
                  and private(node.attr)]
    assert found == []


def test_a_job_under_stepdbg_loads_no_client_module_until_a_pause_asks_for_the_console(tmp_path):
    """The job's start pays for the agent only: the console (and the client modules under
    it) loaded in every job at start, before any pause wanted it (issue 47's start-up cost)."""
    from conftest import run_stepdbg

    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nimport torch\n"
        "m = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(2):\n    opt.zero_grad()\n    m(torch.ones(1, 2)).sum().backward()\n    opt.step()\n"
        "print('loaded:', sorted(n for n in sys.modules if n.startswith(('stepdbg.client', 'stepdbg.cli'))))\n")
    run = run_stepdbg(tmp_path, "-q", str(script))
    assert run.returncode == 0, run.stderr
    assert "loaded: []" in run.stdout, run.stdout
    assert run.of("end")[0]["steps"] == 2  # the agent watched the loop
