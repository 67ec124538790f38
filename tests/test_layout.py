"""The package shows its architecture: one subpackage per capability, each with a
docstring saying what it owns, imports only pointing down the layers (core < build <
audit < the entry points), no module over 600 lines, and the public entry points where
users find them."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mintdim_beam"
# A layer may import the layers before it in this list, never the ones after it.
LAYERS = ["core", "read", "build", "pack", "audit", "entry"]
MAX_LINES = 600


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in LAYERS else "entry"


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level:
            yield node.lineno, "relative"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_imports_only_point_down_the_layers():
    wrong = []
    for path in MODULES:
        here = _layer(_module(path))
        for line, target in _imports(path):
            if target == "relative":
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} relative import")
                continue
            if not target.startswith("mintdim_beam."):
                continue
            there = _layer(target)
            if LAYERS.index(there) > LAYERS.index(here):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} ({here}) imports {target} ({there})")
    assert not wrong, "\n".join(wrong)


def test_every_subpackage_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, init


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_600_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_entry_points_and_helper_start_stay_light():
    """`from mintdim_beam import pipeline` and the console script work; importing the
    package or a helper encoder's module loads neither Beam nor fsspec."""
    code = ("import sys, mintdim_beam, mintdim_beam.build.encoder_process;"
            "from mintdim_beam import pipeline;"
            "print(sorted(m for m in ('apache_beam', 'fsspec') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    script = Path(sys.executable).parent / "mintdim-beam"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "clean" in proc.stdout and "verify" in proc.stdout
