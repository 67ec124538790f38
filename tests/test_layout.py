"""The package shows its architecture: one folder per capability named for its job, each
with a docstring saying what it owns; imports only pointing down the floors (core, then
read and the runtime, then the three pipelines side by side, then audit, then export, then
records (a user's Beam records into both builds), then the entry points), neither pipeline importing the other, no module importing another's private
names, no import cycle, no module over 600 lines, and the public entry points where users
find them."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mintdim_beam"
# Each floor may import the floors before it, never one after it; the two pipelines
# share a floor and may not import each other.
FLOORS = [("core",), ("read",), ("runtime",), ("unit_build", "pack_build", "train_tokenizer"),
          ("audit",), ("export",), ("records",),
          ("entry",)]
CAPABILITIES = {name for floor in FLOORS for name in floor} - {"entry"}
MAX_LINES = 600
# Folder names the common Python .gitignore templates ignore wherever they are.
IGNORED_NAMES = {"build", "dist", "develop-eggs", "downloads", "eggs", "lib", "lib64",
                 "parts", "sdist", "var", "wheels", "env", "venv", "htmlcov", "target"}
# Code outside the package that imports it: its private names are off limits there too.
OTHER_CODE = ["tests", "tests_interop", "tests_cluster", "benchmarks", "tools", "pipelines",
              "examples"]


def _capability(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in CAPABILITIES else "entry"


def _floor(capability: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if capability in floor)


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(PACKAGE.rglob("*.py"))
NAMES = {_module(p) for p in MODULES}


def _targets(path: Path):
    """(line, module imported, names taken from it) for every import of ours in `path`,
    at any depth (a function-level import is an import too)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                yield node.lineno, "relative", []
            elif node.module and node.module.split(".")[0] == "mintdim_beam":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in NAMES:
                        yield node.lineno, full, []
                    else:
                        yield node.lineno, node.module, [alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mintdim_beam":
                    yield node.lineno, alias.name, []


def _private_uses(path: Path):
    """Private names of our modules that `path` takes: `from m import _x`, or `m._x`
    where m names one of our modules."""
    tree = ast.parse(path.read_text())
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level \
                and node.module.split(".")[0] == "mintdim_beam":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in NAMES:
                    bound[alias.asname or alias.name] = full
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in NAMES:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in bound and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            yield node.lineno, f"{bound[node.value.id]}.{node.attr}"


def test_capability_folders_are_named_for_their_job():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == CAPABILITIES
    every = [p.relative_to(ROOT) for p in PACKAGE.rglob("*") if p.is_dir()
             and p.name != "__pycache__"]
    assert not [p for p in every if p.name in IGNORED_NAMES]


def test_imports_only_point_down_the_floors_and_the_pipelines_stay_apart():
    wrong = []
    for path in MODULES:
        here = _capability(_module(path))
        for line, target, _ in _targets(path):
            where = f"{path.relative_to(PACKAGE)}:{line}"
            if target == "relative":
                wrong.append(f"{where} relative import")
                continue
            there = _capability(target)
            if there == here:
                continue
            if _floor(there) > _floor(here):
                wrong.append(f"{where} ({here}) imports {target} ({there}), a floor above")
            elif _floor(there) == _floor(here):
                wrong.append(f"{where} ({here}) imports {target}: the pipelines share no code "
                             "but the runtime and core")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_another_modules_private_names():
    paths = MODULES + sorted(p for d in OTHER_CODE for p in (ROOT / d).rglob("*.py")
                             if ".work" not in p.parts)  # benchmarks' untracked venvs
    wrong = [f"{path.relative_to(ROOT)}:{line} takes {name}"
             for path in paths for line, name in _private_uses(path)
             if name.rsplit(".", 1)[0] != _module(path)]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_modules():
    """Tarjan's strongly connected components over every import of ours (function-level
    ones included): a component of more than one module is a cycle."""
    edges = {m: set() for m in NAMES}
    for path in MODULES:
        for _, target, _ in _targets(path):
            if target in NAMES and target != _module(path):
                edges[_module(path)].add(target)
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(NAMES):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_the_checks_above_see_what_they_look_for(tmp_path):
    """The checkers themselves: a private import and a cycle they must find."""
    probe = tmp_path / "probe.py"
    probe.write_text("from mintdim_beam.core.files import storage\n"
                     "from mintdim_beam.audit.pack_shards import _hidden\nstorage._join('a')\n")
    assert [name for _, name in _private_uses(probe)] == [
        "mintdim_beam.audit.pack_shards._hidden", "mintdim_beam.core.files.storage._join"]
    assert [t for _, t, _ in _targets(probe)] == ["mintdim_beam.core.files.storage",
                                                   "mintdim_beam.audit.pack_shards"]


def test_every_subpackage_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, init


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_600_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_core_is_grouped_by_concern():
    """No flat heap of modules: core's own files are few, the rest in rooms."""
    flat = sorted(p.name for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py")
    assert len(flat) <= 3, flat
    rooms = {p.name for p in (PACKAGE / "core").iterdir() if (p / "__init__.py").exists()}
    assert {"config", "errors", "files", "formats", "inputs", "render", "tokenizer",
            "chat"} <= rooms


def test_entry_points_and_helper_start_stay_light():
    """`from mintdim_beam import pipeline` and the console script work; importing the
    package or a helper encoder's module loads neither Beam nor fsspec."""
    code = ("import sys, mintdim_beam, mintdim_beam.runtime.encoder_process;"
            "from mintdim_beam import pipeline, MintDimError;"
            "print(sorted(m for m in ('apache_beam', 'fsspec') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    script = Path(sys.executable).parent / "mintdim-beam"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "clean" in proc.stdout and "verify" in proc.stdout
