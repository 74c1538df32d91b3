"""The shape of the code, enforced: the stages stay visible, the pure folders stay pure, functions stay small.

A failure here names the file and the line, and says which rule of the README's "Architecture" it breaks."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "job"
#: what talks to the API server, or sends anything anywhere: never imported by a pure folder
API_LAYER = ("job.cluster", "job.run", "job.cli", "job.command", "pykube", "requests", "tenacity", "urllib3",
             "socket", "http", "subprocess", "threading", "concurrent")
#: HTTP and retries: only the API layer (job/cluster) imports them, so there is one way to the API server
HTTP_LIBRARIES = ("pykube", "requests", "tenacity", "urllib3")
#: the one client: the module that builds connections and retries (README: Architecture)
CLIENT = JOB / "cluster" / "kube.py"
#: the clock: `now` is a parameter of every decision
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}
MAX_FUNCTION_LINES = 50
MAX_MODULE_LINES = 400


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


@pytest.mark.parametrize("path", _modules(JOB / "decide") + _modules(JOB / "model"), ids=_name)
def test_the_pure_folders_import_no_api_code(path: Path) -> None:
    bad = [(line, name) for line, name in _imports(path)
           if any(name == layer or name.startswith(layer + ".") for layer in API_LAYER)]
    assert not bad, f"{_name(path)} is pure (job/decide, job/model) but imports the API layer: {bad}"


@pytest.mark.parametrize("path", _modules(JOB), ids=_name)
def test_one_api_client_for_the_run_and_the_plugin(path: Path) -> None:
    """pykube and tenacity in job/cluster/kube.py only, requests and urllib3 in job/cluster only: the run and
    `kubectl nsscaler` (job/plugin) reach the API through the same client, kubeconfig handling and retries."""
    allowed = HTTP_LIBRARIES if path == CLIENT else ("requests", "urllib3") if CLIENT.parent in path.parents else ()
    bad = [(line, name) for line, name in _imports(path)
           if any(name == lib or name.startswith(lib + ".") for lib in HTTP_LIBRARIES if lib not in allowed)]
    assert not bad, (f"{_name(path)} imports {bad}: reach the API through job.cluster.kube.Kube (a constructor, "
                     f"a method there if it lacks one)")


@pytest.mark.parametrize("path", _modules(JOB / "model"), ids=_name)
def test_the_model_depends_on_nothing_above_it(path: Path) -> None:
    bad = [(line, name) for line, name in _imports(path) if name.startswith("job.decide")]
    assert not bad, f"{_name(path)} is a value module (job/model) but imports decisions: {bad}"


@pytest.mark.parametrize("path", _modules(JOB / "decide"), ids=_name)
def test_decisions_never_read_the_clock(path: Path) -> None:
    calls = [(node.lineno, node.func.attr) for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_CALLS]
    assert not calls, f"{_name(path)} reads the clock {calls}: take `now` as a parameter"


@pytest.mark.parametrize("path", _modules(JOB), ids=_name)
def test_functions_and_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines: split it by responsibility"
    long = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{_name(path)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("package", ["job", "bench"])
def test_no_module_imports_in_a_circle(package: str) -> None:
    """Module-level imports only (a function-local import is a deliberate late load)."""
    modules = {_name(p): p for p in _modules(ROOT / package)}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        found = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {m for m in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if m in modules}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
        graph[name] = found - {name}

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                return [*path, nxt]
            if nxt not in path and (found := cycle_from(start, [*path, nxt])):
                return found
        return None
    cycles = [c for c in (cycle_from(m, [m]) for m in sorted(graph)) if c]
    assert not cycles, f"import cycles in {package}/: {cycles[0]}"
