"""The agent's shape (issue 24 item 1): what the app may rely on is typed, nothing imports in a circle,
the rooms share no state bag, and the Agent does not relay its rooms' calls.

- `SessionAgent` (ui/protocol.py), all the app knows of the agent, names no `Any`: each
  member is a type the app can check its use against; so do the Protocols of its rooms.
- The package imports in no circle (function-level and TYPE_CHECKING imports count).
- Every member of `SessionAgent` and of its rooms' Protocols is one the app uses.
- The Agent's public methods are its own (the turn, the model switch, the close, rung 3,
  a request's options): the app, the bench and the tests call a room's calls on the room
  (`agent.ladder.fold`), and no Agent method is one statement handing a call to a room.
- Each room takes narrow inputs at construction: not the Agent, not a shared record, no `Any`.
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


def _protocols() -> list[ast.ClassDef]:
    tree = ast.parse(PROTOCOL.read_text())
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in n.bases)]


def _annotations(cls: ast.ClassDef) -> list[str]:
    return [
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


def test_the_apps_protocols_name_no_any():
    for cls in _protocols():
        annotations = _annotations(cls)
        assert annotations, f"{cls.name} has typed members"
        loose = [a for a in annotations if re.search(r"\bAny\b", a)]
        assert not loose, (cls.name, loose)


def test_every_member_of_the_protocols_is_used_by_the_app():
    text = "\n".join(path.read_text() for path in (PACKAGE / "ui").rglob("*.py") if path != PROTOCOL)
    used = set(re.findall(r"agent\.([a-z_]+)", text))
    unused = sorted(_members(_class(PROTOCOL, "SessionAgent")) - used)
    assert not unused, f"SessionAgent members the app never uses: {unused}"
    # each room's Protocol: the members the app calls on that room
    agent = _class(PROTOCOL, "SessionAgent")
    rooms = {
        n.name: ast.unparse(n.returns)
        for n in agent.body
        if isinstance(n, ast.FunctionDef) and n.returns is not None and ast.unparse(n.returns) in {c.name for c in _protocols()}
    }
    assert {"ladder", "link", "stores", "tools"} <= set(rooms), rooms
    for room, protocol in rooms.items():
        used = set(re.findall(rf"agent\.{room}\.([a-z_]+)", text))
        unused = sorted(_members(_class(PROTOCOL, protocol)) - used)
        assert not unused, f"{protocol} members the app never uses: {unused}"


def test_the_agent_offers_its_own_calls_not_its_rooms():
    own = {"aclose", "request_options", "delegate", "turn", "switch_model"}
    agent = _class(PACKAGE / "agent" / "loop.py", "Agent")
    methods = [n for n in agent.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    public = {m.name for m in methods if not m.name.startswith("_")}
    assert public == own, f"Agent methods that are not its own: {sorted(public - own)}"
    properties = [m.name for m in methods if any(ast.unparse(d) == "property" for d in m.decorator_list)]
    assert not properties, f"Agent properties that stand for a room's attribute: {properties}"
    for m in methods:
        body = [s for s in m.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        relay = (
            len(body) == 1
            and isinstance(body[0], ast.Return)
            and re.fullmatch(r"(await )?self\.[a-z_]+\.[a-z_]+\(.*\)", ast.unparse(body[0].value or ast.Constant(None)))
        )
        assert not relay, f"Agent.{m.name} only hands a call to a room: {ast.unparse(body[0])}"


#: the agent's rooms, each built by the Agent from narrow inputs
ROOMS = {
    "ladder_driver.py": "LadderDriver",
    "budget.py": "LadderBudget",
    "fold_requests.py": "FoldRequests",
    "fold_costs.py": "FoldCosts",
    "tool_runner.py": "ToolRunner",
    "turn.py": "TurnLoop",
    "startup.py": "ModelLink",
    "meter.py": "UsageMeter",
    "kv_slots.py": "SlotKeeper",
    "placement.py": "PlacementKeeper",
    "stores.py": "SessionStores",
}


def test_each_room_takes_narrow_inputs_not_the_agent_nor_a_shared_record():
    assert not (PACKAGE / "agent" / "state.py").exists()
    for module, name in ROOMS.items():
        init = next(
            n for n in _class(PACKAGE / "agent" / module, name).body if isinstance(n, ast.FunctionDef) and n.name == "__init__"
        )
        params = init.args.args[1:] + init.args.kwonlyargs
        annotations = {a.arg: ast.unparse(a.annotation) if a.annotation is not None else "" for a in params}
        assert all(annotations.values()), (name, annotations)
        # a whole input typed Any (data inside a container, `dict[str, Any]` of JSON, is the wire's)
        wide = {k: v for k, v in annotations.items() if re.search(r"(^|\| )(Any|object)( \||$)|\b(Agent|AgentState)\b", v)}
        assert not wide, (name, wide)


def test_the_package_imports_in_no_circle():
    graph = grimp.build_graph("tailrent_tui")
    modules = set(graph.modules)
    circles = [
        (a, b)
        for a in sorted(modules)
        for b in graph.find_modules_directly_imported_by(a)
        if b in modules and graph.chain_exists(importer=b, imported=a)
    ]
    assert not circles, circles


#: the attributes a room holds another room by
ROOM_ATTRIBUTES = "requests|fold_requests|fold_costs|budget|ladder_budget|ladder|tools|meter|slots|placement|stores|link|turns"


def test_no_room_relays_a_call_to_another():
    """A public method of a room that is one statement handing its call to another room is a relay:
    the caller should hold that room (the ladder driver relayed seven calls to its fold requests)."""
    relays = []
    for module, name in ROOMS.items():
        for m in _class(PACKAGE / "agent" / module, name).body:
            if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or m.name.startswith("_"):
                continue
            body = [s for s in m.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                value = ast.unparse(body[0].value)
                if re.fullmatch(rf"(await )?self\.({ROOM_ATTRIBUTES})\.[a-z_]+(\(.*\))?", value):
                    relays.append(f"{name}.{m.name}: {value}")
    assert not relays, relays
