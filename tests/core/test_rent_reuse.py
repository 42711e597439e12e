"""The rent of folds on an engine that shifts KV and keeps recent prompts (issue 23, items 3 and 4)."""

from __future__ import annotations

import pytest

from tailrent_tui.core.rent import HEAD_ID, PriceSheetError, RentModel, get_price_sheet, parse_price_sheets, reused_prefix

H = (HEAD_ID, 500)


def test_a_deletion_is_bridged_and_an_insertion_ends_the_reuse():
    a, b, c, d = ("a", 300), ("b", 300), ("c", 300), ("d", 300)
    summary, new = ("s", 80), ("n", 200)
    assert reused_prefix([H, a, b, c, d], [H, c, d, summary, new], 64) == 500 + 600  # the summary after the kept
    assert reused_prefix([H, a, b, c, d], [H, summary, c, d, new], 64) == 500  # the summary where the span was


def test_a_short_match_is_skipped_and_the_search_goes_on():
    reply, u1, u2 = ("reply", 20), ("u1", 300), ("u2", 300)
    # the same short reply twice: the first is followed by what left, the second by what stays
    previous = [H, reply, u1, ("reply", 20), u2]
    assert reused_prefix(previous, [H, reply, u2], 64) == 500 + 20 + 300
    # 20 tokens alone are not moved: what follows them was never cached
    assert reused_prefix([H, u1, reply, u2], [H, reply, ("x", 300)], 64) == 500


def test_the_local_reuse_sheet_predicts_the_fold_and_the_undo():
    sheet = get_price_sheet("local-reuse")
    assert sheet.reuses_shifted_kv and sheet.prompt_cache and sheet.reuse_min_tokens == 64
    msgs = [(f"m{i}", 300) for i in range(8)]
    for name, fold_read, undo_read in (("local-reuse", 80 + 200, 200), ("local", 6 * 300 + 80 + 200, 8 * 300 + 200)):
        rent = RentModel(get_price_sheet(name))
        rent.request(msgs, 500, at=0.0)
        folded = rent.request([*msgs[2:], ("summary", 80), ("n1", 200)], 500, at=1.0)
        assert folded.tail_tokens == fold_read, name
        undone = rent.request([*msgs, ("n2", 200)], 500, at=2.0)  # /unfold: the pre-fold prompt again
        assert undone.tail_tokens == undo_read, name


def test_shifted_reuse_is_for_local_engines_only():
    text = """[odd]
input_per_mtok = 1.0
cache_write_multiplier = 1.0
cache_read_multiplier = 0.1
output_per_mtok = 1.0
min_cacheable = 0
ttl_seconds = 300
reuses_shifted_kv = true
"""
    with pytest.raises(PriceSheetError, match="reuses_shifted_kv: only a local engine"):
        parse_price_sheets(text)


async def fold_and_cost(make_agent, sheet: str):
    from tests.models.test_summary_aligned import chatter

    agent = make_agent(window=8192, tokenizer="chars4", price_sheet=sheet, system_prompt="Be brief.")
    await agent.link.start()
    i = 0
    while not agent.session.folds:
        await agent.turn(chatter(i, 300))
        i += 1
    return agent, agent.fold_costs.unfold_cost(agent.session.folds[-1].fold_no)


async def test_undoing_the_latest_fold_is_priced_from_the_prompt_cache(make_agent):
    agent, (tokens, _, cached) = await fold_and_cost(make_agent, "local-reuse")
    _, (plain, _, plain_cached) = await fold_and_cost(make_agent, "local")
    assert cached and not plain_cached
    # the pre-fold prompt is found whole; only what came after the fold is read
    assert tokens < plain / 3
    agent.rent.expire()  # the prompt cache was evicted between the fold and the undo
    evicted, _, still = agent.fold_costs.unfold_cost(agent.session.folds[-1].fold_no)
    assert not still and evicted > plain / 2


def test_the_end_of_a_generated_reply_is_read_again_by_the_request_that_runs_through_it():
    # llama.cpp keeps the reply's tokens but never evaluated its last one, and the template writes the
    # reply's end of turn and the next reply's opening: 7 tokens a request on SmolLM2, 11% of the 60-token
    # summary instruction asked right after a reply (measured 65, predicted 58 before)
    for name in ("local", "local-reuse"):
        rent = RentModel(get_price_sheet(name))
        rent.request([("u1", 300)], 500, at=0.0)
        rent.generated(("r1", 13), reread=6)
        instruction = rent.request([("u1", 300), ("r1", 13), ("ask", 58)], 500, at=1.0)
        assert instruction.tail_tokens == 58 + 6, name
        # a request that leaves the reply out reads from where it differs, no more
        rent.generated(("answer", 32), reread=6)
        turn = rent.request([("u1", 300), ("r1", 13), ("u2", 250)], 500, at=2.0)
        assert turn.tail_tokens == 250, name
    # a priced API reads every reply again anyway: nothing more to count
    rent = RentModel(get_price_sheet("anthropic-5m"))
    rent.request([("u1", 3000)], 500, at=0.0)
    rent.generated(("r1", 13), reread=6)
    assert rent.request([("u1", 3000), ("r1", 13), ("u2", 250)], 500, at=1.0).tail_tokens == 13 + 250
