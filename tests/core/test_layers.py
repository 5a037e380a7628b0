"""One way down through the code: the layer contract in pyproject.toml ([tool.importlinter]) holds, every package is
in a layer, and no tunehost module imports itself back through others (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tunehost", "checks")   # checks/ installs as tunehost.checks; from the source tree it is `checks`


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in contract["layers"] for name in layer.replace(":", "|").split("|")]


def test_the_layer_contract_is_kept() -> None:
    """lint-imports exits 0 only when every layer imports from the layers below it alone."""
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_contract_breaks_when_a_lower_layer_imports_a_higher_one(tmp_path) -> None:
    """The same tool on the same code, with facts/ placed below host/: it must report facts importing host."""
    config = tmp_path / "reversed.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["tunehost"]\n\n[[tool.importlinter.contracts]]\n'
                      'name = "reversed"\ntype = "layers"\nlayers = ["tunehost.host", "tunehost.facts"]\n')
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache", "--config", str(config)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "tunehost.facts is not allowed to import tunehost.host" in result.stdout


def test_every_package_and_top_module_sits_in_a_layer() -> None:
    """A new package or top-level module cannot escape the contract by being left out of it."""
    layered = set(_layers())
    found = {f"tunehost.{p.stem}" for p in (ROOT / "tunehost").glob("*.py") if p.stem not in ("__init__", "__main__")}
    found |= {f"tunehost.{p.parent.name}" for p in (ROOT / "tunehost").glob("*/__init__.py")}
    found.add("checks")
    assert found - layered == set()
    assert layered - found == set()   # no stale name either


def test_nothing_imports_the_checks_through_the_installed_name() -> None:
    """The linted graph sees checks/ as `checks`: an import of `tunehost.checks...` from the code would slip past it
    (checks load through their entry points only)."""
    offenders = []
    for path in sorted((ROOT / "tunehost").rglob("*.py")) + sorted((ROOT / "checks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("tunehost.checks")]
    assert offenders == []


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(name)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a.d", imported="a.b")
    assert _cycles(graph) == [["a.b", "a.c"]]


def _graph(*, runtime_only: bool) -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph(*PACKAGES, include_external_packages=False,
                                 exclude_type_checking_imports=runtime_only, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def test_no_import_cycle_among_tunehost_modules() -> None:
    """Every import that runs (function-level ones included; `if TYPE_CHECKING:` ones never run) points one way."""
    graph = _graph(runtime_only=True)
    assert len(graph.modules) > 90
    assert _cycles(graph) == []


def test_the_host_layer_loads_no_probe_until_a_run_that_measures_declares_it() -> None:
    """host/ alone registers its own samplers; `doctor`'s enable_measuring (tunehost.ops.doctor) imports the probes, which declare the
    `measure` sampler to the host layer (a fresh interpreter: nothing imported before)."""
    code = (
        "import sys\n"
        "from tunehost.host import open_host\n"
        "from tunehost.host.samples import SAMPLERS\n"
        "host = open_host()\n"
        "assert 'nvml' in SAMPLERS and 'measure' not in SAMPLERS, sorted(SAMPLERS)\n"
        "assert not [m for m in sys.modules if m.startswith(('tunehost.probes', 'tunehost.facts', 'tunehost.advise'))]\n"
        "from tunehost.ops.doctor import enable_measuring\n"
        "enable_measuring(host, quick=True)\n"
        "assert 'measure' not in SAMPLERS\n"
        "enable_measuring(host, quick=False)\n"
        "assert 'measure' in SAMPLERS\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]


def test_annotation_only_circles_stay_inside_one_package() -> None:
    """Counting `if TYPE_CHECKING:` imports too, a circle may only join a package to its own modules (the Host class
    and the samplers whose signatures name it), never two packages."""
    packages = [{".".join(m.split(".")[:2]) for m in circle} for circle in _cycles(_graph(runtime_only=False))]
    assert all(len(p) == 1 for p in packages), packages


def test_every_package_is_installed_by_pip_install() -> None:
    """`pip install .` installs only the packages pyproject.toml lists: a new package missing there works in the
    editable checkout and is absent from a real install."""
    import tomllib

    repo = Path(__file__).resolve().parents[2]
    listed = set(tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(repo).parts) for p in (repo / "tunehost").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
