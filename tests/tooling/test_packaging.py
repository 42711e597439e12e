"""The wheel: what `pip install tailrent` gets, built offline from this tree and read from where it is installed.

Building the wheel takes 12 s on this (loaded, 2-core) machine, each load 6 s: the wheel is built once for the module.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in (ROOT / "themes").glob("*.toml"))

# run in a fresh interpreter whose first path entry is the wheel (zipped, or unpacked as pip installs it)
LOAD_THEMES = """
import json, sys
sys.path.insert(0, sys.argv[1])
import tailrent_tui
from tailrent_tui.ui.themes import load_themes, packaged_theme_dirs
dirs = packaged_theme_dirs()
themes, errors = load_themes(dirs)
print(json.dumps({"package": tailrent_tui.__file__, "dirs": [str(d) for d in dirs],
                  "themes": sorted(t.name for t in themes), "errors": errors}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # offline: hatchling (the build backend, in the test extra) from this venv, nothing from an index
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    command += ["-w", str(out), str(ROOT)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [built] = out.glob("tailrent-*.whl")
    return built


def load_from(entry: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_THEMES, str(entry)], capture_output=True, text=True, cwd=entry.parent, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_wheel_ships_the_themes_as_package_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.startswith("tailrent_tui/_themes/")) == [
        f"tailrent_tui/_themes/{stem}.toml" for stem in SHIPPED
    ]
    assert not any(n.startswith("themes/") for n in names), "the source tree's folder is carried inside the package"


def test_the_themes_load_from_an_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipfile.ZipFile(wheel).extractall(site)  # what pip puts in site-packages
    found = load_from(site)
    assert found["package"] == str(site / "tailrent_tui" / "__init__.py")
    assert found["dirs"] == [str(site / "tailrent_tui" / "_themes")]
    assert found["themes"] == SHIPPED and found["errors"] == []


def test_the_themes_load_from_the_zipped_wheel(wheel: Path) -> None:
    # no file path to guess from: only importlib.resources can read them
    found = load_from(wheel)
    assert found["package"] == f"{wheel}/tailrent_tui/__init__.py"
    assert [d.rstrip("/") for d in found["dirs"]] == [f"{wheel}/tailrent_tui/_themes"]
    assert found["themes"] == SHIPPED and found["errors"] == []


def test_a_checkout_reads_the_source_trees_themes() -> None:
    from tailrent_tui.ui.themes import packaged_theme_dirs

    # the editable install of this venv: the package is the source tree, which has no _themes
    assert packaged_theme_dirs() == [ROOT / "themes"]
