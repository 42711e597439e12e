"""The ledger corpus and canary traces are well-formed (issue 22, item 7): data only, no detector.

tests/ledger_corpus/README.md describes the format. Checked here: ids unique and
in order, every ``quote`` a substring of its ``text``, every ``must_keep`` a
substring of its ``quote``, every ``supersedes`` an earlier id of the same file
whose statements share a kind with the correction, the kinds and roles known,
the minimum sizes of issue 22; the canary traces parse, carry probes, and are
what ``make_canary.py`` writes.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import pathlib

import pytest

from tailrent_tui.scenarios.traces import load_trace

HERE = pathlib.Path(__file__).resolve().parents[1] / "ledger_corpus"
KINDS = ("decision", "rule", "constraint", "preference", "goal", "fact")
ROLES = ("user", "assistant", "tool", "instructions")
FILES = {
    "heldout.jsonl": "h",
    "dev.jsonl": "d",
    "heldout2.jsonl": "g",
    "heldout3.jsonl": "k",
    "heldout4.jsonl": "m",
    "heldout5.jsonl": "n",
    "heldout6.jsonl": "p",
}
TRACES = (
    "canary-typed.jsonl",
    "canary-natural.jsonl",
    "repetitive.jsonl",
    "canary-heldout.jsonl",
    "canary-heldout3.jsonl",
    "canary-heldout4.jsonl",
    "canary-heldout5.jsonl",
    "canary-heldout6.jsonl",
)
HELDOUT_CANARIES = {
    "heldout2": ("heldout2.jsonl", "canary-heldout.jsonl"),
    "heldout3": ("heldout3.jsonl", "canary-heldout3.jsonl"),
    "heldout4": ("heldout4.jsonl", "canary-heldout4.jsonl"),
    "heldout5": ("heldout5.jsonl", "canary-heldout5.jsonl"),
    "heldout6": ("heldout6.jsonl", "canary-heldout6.jsonl"),
}
# the corpus author's map of what each correction replaces: {correction id: [[old index, "retire"|"amend", stale words]]}
RETIRES = {
    "heldout4": "src/heldout4-retires.json",
    "heldout5": "src/heldout5-retires.json",
    "heldout6": "src/heldout6-retires.json",
}


def load(name: str) -> list[dict]:
    with open(HERE / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("name", sorted(FILES))
def test_lines_are_well_formed(name: str) -> None:
    prefix, seen, errors = FILES[name], {}, []
    for n, row in enumerate(load(name), 1):
        rid = row.get("id")
        if set(row) != {"id", "role", "text", "statements", "supersedes"}:
            errors.append(f"{rid}: keys {sorted(row)}")
        if rid != f"{prefix}{n:03d}":
            errors.append(f"{rid}: expected id {prefix}{n:03d}")
        if rid in seen:
            errors.append(f"{rid}: duplicate id")
        if row.get("role") not in ROLES:
            errors.append(f"{rid}: role {row.get('role')!r}")
        text = row.get("text") or ""
        if not text.strip():
            errors.append(f"{rid}: empty text")
        for st in row.get("statements", []):
            if set(st) - {"kind", "quote", "must_keep", "proposal"}:
                errors.append(f"{rid}: statement keys {sorted(st)}")
            if st.get("kind") not in KINDS:
                errors.append(f"{rid}: kind {st.get('kind')!r}")
            quote = st.get("quote") or ""
            if not quote.strip() or quote not in text:
                errors.append(f"{rid}: quote not in text: {quote!r}")
            if not st.get("must_keep"):
                errors.append(f"{rid}: no must_keep")
            errors += [f"{rid}: must_keep {k!r} not in {quote!r}" for k in st.get("must_keep", []) if not k or k not in quote]
            if "proposal" in st and (st["proposal"] is not True or row["role"] != "assistant"):
                errors.append(f"{rid}: proposal is true, and only on assistant lines")
        sup = row.get("supersedes")
        if sup is not None:
            if sup not in seen:
                errors.append(f"{rid}: supersedes {sup!r}, which is not an earlier id")
            elif not {s["kind"] for s in seen[sup]["statements"]} & {s["kind"] for s in row["statements"]}:
                errors.append(f"{rid}: supersedes {sup}, but shares no kind with it")
        seen[rid] = row
    assert not errors, "\n".join(errors)


def test_sizes_and_mix() -> None:
    rows = {name: load(name) for name in FILES}
    everything = rows["heldout.jsonl"] + rows["dev.jsonl"]
    kinds = collections.Counter(st["kind"] for row in everything for st in row["statements"])
    assert len(everything) >= 480
    share = len(rows["heldout.jsonl"]) / len(everything)
    assert 0.22 <= share <= 0.28, share
    assert all(kinds[k] >= 40 for k in KINDS), kinds
    assert sum(1 for row in everything if row["supersedes"]) >= 40
    assert sum(1 for row in everything if not row["statements"]) >= len(everything) / 3
    for part in rows.values():  # the held-out part has the dev part's mix: every kind, corrections, empty lines
        assert {st["kind"] for row in part for st in row["statements"]} == set(KINDS)
        assert any(row["supersedes"] for row in part)
        assert {row["role"] for row in part} == set(ROLES)


def test_second_heldout_sizes_and_mix() -> None:
    """heldout2 (written by a second hand, before any detector change of its session) stands on its own."""
    rows = load("heldout2.jsonl")
    kinds = collections.Counter(st["kind"] for row in rows for st in row["statements"])
    assert len(rows) >= 240
    assert all(kinds[k] >= 25 for k in KINDS), kinds
    assert sum(1 for row in rows if row["supersedes"]) >= 15
    assert sum(1 for row in rows if not row["statements"]) >= len(rows) / 3
    assert any(st.get("proposal") for row in rows for st in row["statements"])


def test_third_heldout_sizes_and_mix() -> None:
    """heldout3 (a third hand, never shown the detector, committed before any detector change) stands on its own."""
    rows = load("heldout3.jsonl")
    kinds = collections.Counter(st["kind"] for row in rows for st in row["statements"])
    assert len(rows) >= 260
    assert all(kinds[k] >= 25 for k in KINDS), kinds
    assert sum(1 for row in rows if row["supersedes"]) >= 30
    assert sum(1 for row in rows if not row["statements"]) >= 0.35 * len(rows)
    assert any(st.get("proposal") for row in rows for st in row["statements"])
    position = {row["id"]: n for n, row in enumerate(rows)}
    assert sum(1 for row in rows if row["supersedes"] and position[row["id"]] - position[row["supersedes"]] >= 50) >= 10


def test_fourth_heldout_sizes_and_mix() -> None:
    """heldout4 (a fourth hand, never shown the detector or its training data, committed alone) stands on its own."""
    rows = load("heldout4.jsonl")
    kinds = collections.Counter(st["kind"] for row in rows for st in row["statements"])
    assert len(rows) >= 320
    assert all(kinds[k] >= 25 for k in KINDS), kinds
    assert {row["role"] for row in rows} == set(ROLES)
    assert sum(1 for row in rows if row["supersedes"]) >= 35
    assert sum(1 for row in rows if not row["statements"]) >= len(rows) / 3
    assert any(st.get("proposal") for row in rows for st in row["statements"])
    position = {row["id"]: n for n, row in enumerate(rows)}
    assert sum(1 for row in rows if row["supersedes"] and position[row["id"]] - position[row["supersedes"]] >= 50) >= 10


@pytest.mark.parametrize(
    ("part", "lines", "per_kind", "corrections"),
    [
        ("heldout5", 360, 25, 45),  # a fifth hand, never shown the detector or its training data, committed alone
        ("heldout6", 380, 30, 50),  # a sixth hand, the same way
    ],
)
def test_late_heldout_sizes_and_mix(part: str, lines: int, per_kind: int, corrections: int) -> None:
    """heldout5 and heldout6 each stand on their own: size, every kind, corrections far apart, chains."""
    rows = load(f"{part}.jsonl")
    kinds = collections.Counter(st["kind"] for row in rows for st in row["statements"] if not st.get("proposal"))
    assert len(rows) >= lines
    assert all(kinds[k] >= per_kind for k in KINDS), kinds
    assert {row["role"] for row in rows} == set(ROLES)
    assert sum(1 for row in rows if row["role"] == "instructions") >= 3
    assert sum(1 for row in rows if row["supersedes"]) >= corrections
    assert sum(1 for row in rows if not row["statements"]) >= len(rows) / 3
    assert any(st.get("proposal") for row in rows for st in row["statements"])
    position = {row["id"]: n for n, row in enumerate(rows)}
    assert sum(1 for row in rows if row["supersedes"] and position[row["id"]] - position[row["supersedes"]] >= 50) >= 35
    corrected = collections.Counter(row["supersedes"] for row in rows if row["supersedes"])
    chains = {row["id"]: row["supersedes"] for row in rows if row["supersedes"]}

    def depth(rid: str) -> int:
        return 1 + depth(chains[rid]) if rid in chains else 1

    assert max(depth(rid) for rid in chains) >= 4  # a chain of four lines
    assert any(n >= 2 for n in corrected.values())  # one line corrected twice, for different statements


@pytest.mark.parametrize("name", TRACES)
def test_traces_parse(name: str) -> None:
    lines = load(name)
    header, events = lines[0], lines[1:]
    assert set(header) >= {"trace", "window", "system"}
    assert (HERE / name).stat().st_size < 2_200_000
    probes = [e for e in events if "probe" in e]
    assert probes
    trace = load_trace(HERE / name)  # the bench reads it; "stale" is the one field beyond DESIGN.md
    assert set(trace.ignored_field_names) <= {"stale"}
    assert trace.window == header["window"] and len(trace.probes) == len(probes)
    for e in events:
        if "probe" in e:
            assert isinstance(e["expect"], list) and e["expect"]
            assert all(isinstance(w, str) and w for w in e["expect"] + e.get("stale", []))
            assert not {w.lower() for w in e["expect"]} & {w.lower() for w in e.get("stale", [])}
        elif "idle" in e:
            assert e["idle"] > 0
        else:
            assert e["role"] in ("user", "assistant", "tool", "system") and isinstance(e["content"], str)
            if e["role"] == "tool":
                assert e["tool"]


def test_canary_generator_is_deterministic(tmp_path: pathlib.Path) -> None:
    spec = importlib.util.spec_from_file_location("make_canary", HERE / "make_canary.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_all(tmp_path)
    for name in TRACES[:3]:
        assert (tmp_path / name).read_bytes() == (HERE / name).read_bytes(), name


def _heldout_generator():
    spec = importlib.util.spec_from_file_location("make_canary_heldout", HERE / "make_canary_heldout.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("source", sorted(HELDOUT_CANARIES))
def test_heldout_canary_is_what_its_generator_writes(tmp_path: pathlib.Path, source: str) -> None:
    _heldout_generator().write(tmp_path, source)
    name = HELDOUT_CANARIES[source][1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (tmp_path / name).read_bytes() == (HERE / name).read_bytes()


def test_heldout_canary_generator_refuses_an_unknown_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert _heldout_generator().main(["--from", "heldout9"]) == 2
    assert "heldout3" in capsys.readouterr().err


@pytest.mark.parametrize("source", sorted(HELDOUT_CANARIES))
def test_heldout_canary_follows_its_corpus(source: str) -> None:
    """Every line of the corpus is a message, in order; the last round probes each current user statement, and
    each correction's old words (where they are the old value's alone) are a stale probe, never expected. With
    its author's map (heldout4, heldout5, heldout6) a correction retires or amends the statements the map names; without
    one it retires every statement of its kinds in the line it corrects."""
    corpus, canary = HELDOUT_CANARIES[source]
    rows, events = load(corpus), load(canary)[1:]
    texts = [e["content"] for e in events if "role" in e]
    at = 0
    for row in rows:
        at = next(i for i in range(at, len(texts)) if texts[i].endswith(row["text"])) + 1
    rounds = {e["probe"].split("]")[0] for e in events if "probe" in e}
    last = [e for e in events if "probe" in e and e["probe"].startswith(max(rounds, key=lambda r: int(r.split()[1])))]
    superseded = {(r["supersedes"], st["kind"]) for r in rows if r["supersedes"] for st in r["statements"]}
    expected = {
        (r["id"], tuple(st["must_keep"]))
        for r in rows
        for st in r["statements"]
        if not st.get("proposal") and (r["id"], st["kind"]) not in superseded
    }
    if source in RETIRES:
        retires = json.loads((HERE / RETIRES[source]).read_text(encoding="utf-8"))
        by_id = {r["id"]: r for r in rows}
        assert set(retires) == {r["id"] for r in rows if r["supersedes"]}
        gone = {(by_id[c]["supersedes"], i) for c, entries in retires.items() for i, how, _ in entries if how == "retire"}
        amended: dict[tuple[str, int], set[str]] = collections.defaultdict(set)
        for c, entries in retires.items():
            for i, how, words in entries:
                if how == "amend":
                    amended[(by_id[c]["supersedes"], i)] |= set(words)
        expected = {
            (r["id"], tuple(w for w in st["must_keep"] if w not in amended[(r["id"], i)]))
            for r in rows
            for i, st in enumerate(r["statements"])
            if not st.get("proposal") and (r["id"], i) not in gone
        }
        assert amended and gone  # the map does both, so the comparison below covers both
    assert {(e["probe"].split()[2], tuple(e["expect"])) for e in last} == expected
    stale = {w for e in last for w in e.get("stale", [])}
    assert stale and not stale & {w for e in last for w in e["expect"]}
