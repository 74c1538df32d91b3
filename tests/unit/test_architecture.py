"""The shape of the code, enforced: the layers stay in order, the pure folders stay pure, functions stay small.

A failure here names the file and the line, and says which rule of docs/contributing/architecture.md it breaks."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "job"
#: The layer order, bottom first: a module may import its own layer and any layer below it, never one above.
#: Modules named in one entry are beside each other: neither imports the other. `job` itself (the package's
#: version) and `job.errors` are at the bottom, usable by all. `job.cluster` imports `job.decide`: the API layer
#: calls decide as a library (what to read next, what a Pod's chain means), and decide never calls back.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("job", "job.errors"),  # the version; what went wrong
    ("job.model",),  # values and their parsing
    ("job.decide",),  # every decision, pure
    ("job.cluster",),  # the API side: reads, writes, the one client
    ("job.findings",),  # what a run found, said in its log each run
    ("job.run",),  # orders the stages
    ("job.release",),  # the release: the run's stages until nothing is held
    ("job.report",),  # logs, summary, JSON
    ("job.cli", "job.plugin", "job.waker"),  # the `nsscaler` command; `kubectl nsscaler` and the waker, beside it
    ("job.command",),  # the CronJob's process
    ("job.__main__",),  # `python -m job`
)
#: what does I/O or runs in the background: never imported by a pure folder (job/decide, job/model)
IO_MODULES = ("pykube", "requests", "tenacity", "urllib3", "socket", "http", "subprocess", "threading", "concurrent")
#: HTTP and retries: only the API layer (job/cluster) imports them, so there is one way to the API server
HTTP_LIBRARIES = ("pykube", "requests", "tenacity", "urllib3")
#: the one client: the module that builds connections and retries (docs/contributing/architecture.md)
CLIENT = JOB / "cluster" / "kube.py"
#: the clock: `now` is a parameter of every decision
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}
MAX_FUNCTION_LINES = 50
MAX_MODULE_LINES = 400


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every import of a module, as absolute names (a relative one resolved), with its line."""
    package = _name(path).split(".")[:None if path.name == "__init__.py" else -1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


KNOWN = {_name(p) for p in _modules(JOB)}


def _module_of(imported: str) -> str | None:
    """The module of ours an import names (`job.decide.plan.Plan` -> `job.decide.plan`), or None."""
    parts = imported.split(".")
    return next((m for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if m in KNOWN), None)


def _entry(module: str) -> str | None:
    """The entry of LAYERS a module of ours belongs to (the longest that contains it); `job` only itself."""
    entries = [e for layer in LAYERS for e in layer
               if module == e or (e != "job" and module.startswith(e + "."))]
    return max(entries, key=len, default=None)


def _rank(entry: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if entry in layer)


def _order() -> str:
    return " < ".join(" | ".join(layer) for layer in LAYERS)


def _against_the_order(path: Path) -> Iterator[str]:
    where = path.relative_to(ROOT)
    here = _entry(_name(path))
    if here is None:
        yield f"{where}: {_name(path)} is in no layer"
        return
    edges = {(line, target) for line, imported in _imports(path) if (target := _module_of(imported))}
    for line, target in sorted(edges):
        there = _entry(target)
        if there is None or there == here or any(n == line and t.startswith(target + ".") for n, t in edges):
            continue  # `from job.cluster import kube` is one edge, to job.cluster.kube
        edge = f"{where}:{line}: {_name(path)} -> {target}"
        if _rank(there) > _rank(here):
            yield f"{edge}: {here} is below {there} and may not import it"
        elif _rank(there) == _rank(here):
            yield f"{edge}: {here} and {there} are beside each other and may not import each other"


def test_every_module_has_a_layer() -> None:
    lost = sorted(m for m in KNOWN if _entry(m) is None)
    assert not lost, f"modules in no layer: {lost}; add them to LAYERS here and to docs/contributing/architecture.md"
    unused = sorted(e for layer in LAYERS for e in layer if e not in KNOWN)
    assert not unused, f"LAYERS names modules that do not exist: {unused}"


@pytest.mark.parametrize("path", _modules(JOB), ids=_name)
def test_imports_follow_the_layer_order(path: Path) -> None:
    """Every import, at module level or in a function (a late load is still an edge), follows LAYERS."""
    bad = list(_against_the_order(path))
    assert not bad, "imports against the layer order (" + _order() + "):\n" + "\n".join(bad)


@pytest.mark.parametrize("path", _modules(JOB / "decide") + _modules(JOB / "model"), ids=_name)
def test_the_pure_folders_do_no_io(path: Path) -> None:
    bad = [(line, name) for line, name in _imports(path)
           if any(name == lib or name.startswith(lib + ".") for lib in IO_MODULES)]
    assert not bad, f"{_name(path)} is pure (job/decide, job/model) but imports I/O: {bad}"


@pytest.mark.parametrize("path", _modules(JOB), ids=_name)
def test_one_api_client_for_the_run_and_the_plugin(path: Path) -> None:
    """pykube and tenacity in job/cluster/kube.py only, requests and urllib3 in job/cluster only: the run and
    `kubectl nsscaler` (job/plugin) reach the API through the same client, kubeconfig handling and retries."""
    allowed = HTTP_LIBRARIES if path == CLIENT else ("requests", "urllib3") if CLIENT.parent in path.parents else ()
    bad = [(line, name) for line, name in _imports(path)
           if any(name == lib or name.startswith(lib + ".") for lib in HTTP_LIBRARIES if lib not in allowed)]
    assert not bad, (f"{_name(path)} imports {bad}: reach the API through job.cluster.kube.Kube (a constructor, "
                     f"a method there if it lacks one)")


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
