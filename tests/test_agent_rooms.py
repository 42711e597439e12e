"""The agent's shape (issue 24 item 1): what the app may rely on is typed, nothing imports in a circle,
and the Agent does not relay its rooms' calls under second names.

- `SessionAgent` (ui/protocol.py), all the app knows of the agent, names no `Any`: each
  member is a type the app can check its use against.
- The agent package imports in no circle (function-level and TYPE_CHECKING imports count).
- Every member of `SessionAgent` is one the app uses, and the Agent's public methods are
  the Protocol's, the close, the model's start, or rung 3: no method exists only to hand
  a call to a room (the bench and tests call `agent.ladder....` themselves).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[1] / "tailrent_tui"
PROTOCOL = PACKAGE / "ui" / "protocol.py"


def _class(path: Path, name: str) -> ast.ClassDef:
    tree = ast.parse(path.read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _members(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_apps_protocol_names_no_any():
    cls = _class(PROTOCOL, "SessionAgent")
    annotations = [
        ast.unparse(n)
        for node in ast.walk(cls)
        for n in (
            [node.returns, *[a.annotation for a in node.args.args + node.args.kwonlyargs]]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            else [node.annotation]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if n is not None
    ]
    assert annotations, "the Protocol has typed members"
    loose = [a for a in annotations if re.search(r"\bAny\b", a)]
    assert not loose, loose


def test_every_member_of_the_protocol_is_used_by_the_app():
    used = set()
    for path in (PACKAGE / "ui").rglob("*.py"):
        used |= set(re.findall(r"agent\.([a-z_]+)", path.read_text()))
    unused = sorted(_members(_class(PROTOCOL, "SessionAgent")) - used)
    assert not unused, f"SessionAgent members the app never uses: {unused}"


def test_the_agent_offers_the_protocol_and_its_own_calls_not_its_rooms_under_other_names():
    own = {"aclose", "request_options", "delegate"}
    agent = _class(PACKAGE / "agent" / "loop.py", "Agent")
    methods = {n.name for n in agent.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    public = {m for m in methods if not m.startswith("_")}
    extra = sorted(public - _members(_class(PROTOCOL, "SessionAgent")) - own)
    assert not extra, f"Agent methods that are neither the app's nor the Agent's own: {extra}"


def test_the_agent_modules_import_in_no_circle():
    graph = grimp.build_graph("tailrent_tui")
    modules = {m for m in graph.modules if m.startswith("tailrent_tui.agent")}
    circles = [
        (a, b)
        for a in sorted(modules)
        for b in graph.find_modules_directly_imported_by(a)
        if b in modules and graph.chain_exists(importer=b, imported=a)
    ]
    assert not circles, circles
