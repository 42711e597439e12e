"""The agent in rooms (issue 16): no class of agent/ passes ~300 lines, and its modules import in no circle."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

AGENT = Path(__file__).resolve().parents[1] / "tailrent_tui" / "agent"


def test_no_class_in_the_agent_passes_300_lines():
    sizes = {}
    for path in AGENT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                sizes[f"{path.relative_to(AGENT)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert max(sizes.values()) <= 300, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


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
