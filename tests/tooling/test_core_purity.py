"""core/ must stay free of the UI and I/O libraries (DESIGN.md: layers)."""

import ast
import subprocess
import sys
from pathlib import Path

import tailrent_tui.core as core_pkg

FORBIDDEN = ("textual", "httpx", "aiofiles")
CORE = Path(core_pkg.__file__).parent


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
            if node.module.startswith("tailrent_tui.") and not node.module.startswith("tailrent_tui.core"):
                roots.add(node.module)
    return roots


def test_no_core_module_names_a_forbidden_import():
    offenders = {}
    for path in CORE.rglob("*.py"):
        bad = {r for r in _imported_roots(path) if r in FORBIDDEN or r.startswith("tailrent_tui.")}
        if bad:
            offenders[str(path.relative_to(CORE))] = sorted(bad)
    assert offenders == {}, f"core imports outside its layer: {offenders}"


def test_importing_all_of_core_loads_no_forbidden_module():
    modules = sorted(
        "tailrent_tui.core." + ".".join(p.relative_to(CORE).with_suffix("").parts)
        for p in CORE.rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import httpx\nfrom textual.app import App\n")
    assert {"httpx", "textual"} <= _imported_roots(bad)
