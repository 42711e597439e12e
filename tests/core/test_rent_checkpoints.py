"""The rent model on an engine that keeps context checkpoints (llama.cpp with a sliding-window model, issue 23).

The figures are llama.cpp's own (xllamacpp 2026.10, gemma3-270m, n_swa 512, its defaults: 32 checkpoints, an
8,192-token min step), measured with a system prompt then eight ~170-token messages, user and assistant in turn,
each request asking one token: `timings.cache_n` of each request, against what the rent model predicts from the
messages' token counts (`benchmarks/RESULTS.md`, the seventh pass)."""

from __future__ import annotations

import pytest

from tailrent_tui.core.rent import Checkpoints, PriceSheet, RentModel, get_price_sheet

#: the tokens each message adds to the prompt, as the server's template framed them (system, u0, a1, ... a7)
SIZES = [27, 170, 164, 199, 145, 202, 170, 187, 167]
ROLES = ["system"] + ["user", "assistant"] * 4


def gemma_sheet(**update) -> PriceSheet:
    return get_price_sheet("local").model_copy(update={"checkpoints": 32, "swa_tokens": 512, **update})


def items(sizes: list[int], changed: dict[int, int] | None = None) -> list[tuple[str, int]]:
    changed = changed or {}
    return [(f"m{i}{'x' if i in changed else ''}#chat", changed.get(i, t)) for i, t in enumerate(sizes)]


def rent_for(sheet: PriceSheet) -> RentModel:
    rent = RentModel(sheet)
    rent.user_start = lambda key: ROLES[int(key[1 : key.index("#")].rstrip("x"))] != "assistant"
    return rent


def cached(rent: RentModel, request: list[tuple[str, int]]) -> int:
    return rent.request(request, 0, 0.0).cached_tokens


def test_a_change_behind_the_window_restarts_from_the_user_message_before_it():
    rent = rent_for(gemma_sheet())
    for n in (3, 5, 7, 9):  # the conversation grows by a user message and a reply each time
        cached(rent, items(SIZES[:n]))
    # the fifth message (a reply) changed: 870 tokens from the end, behind the 512 window; llama.cpp restored the
    # checkpoint it took at the start of the user message before it (367, after that message's 6-token header)
    e = items(SIZES, {4: 176})
    assert cached(rent, e) == sum(SIZES[:3]) == 361
    # the conversation as it was: the slot holds the changed one now, and its checkpoints past 361 went with it.
    # Measured: 1,426, the server's host-RAM prompt cache gave back the prompt before the change (not modelled
    # here: on the next such request, below, it did not)
    assert cached(rent, items(SIZES)) == 361


def test_a_changed_user_message_restarts_at_its_own_start():
    rent = rent_for(gemma_sheet())
    for n in (3, 5, 7, 9):
        cached(rent, items(SIZES[:n]))
    # measured 711 (the checkpoint after the message's header)
    assert cached(rent, items(SIZES, {5: 184})) == sum(SIZES[:5]) == 705
    # and the conversation as it was, after it: the same checkpoint (measured 711)
    assert cached(rent, items(SIZES)) == 705


def test_a_change_inside_the_window_keeps_the_common_prefix():
    rent = rent_for(gemma_sheet())
    for n in (3, 5, 7, 9):
        cached(rent, items(SIZES[:n]))
    # the last user message changed, 354 tokens from the end: within the window, no checkpoint needed (measured
    # 1,095: the message's first tokens matched too)
    assert cached(rent, items(SIZES, {7: 190})) == sum(SIZES[:7]) == 1077
    # the plain rule (no checkpoints) says the same there, and more where the change is further back
    plain = rent_for(get_price_sheet("local"))
    for n in (3, 5, 7, 9):
        cached(plain, items(SIZES[:n]))
    assert cached(plain, items(SIZES, {4: 176})) == 560


def test_a_full_list_keeps_the_first_checkpoint_and_the_newest_requests():
    cps = Checkpoints(limit=4, min_step=8192)
    every = lambda key: True  # noqa: E731
    # a session that grows by one ~260-token turn a request, each read from where the last ended
    sizes = [248] + [260] * 8
    for n in range(2, len(sizes) + 1):
        cps.read(items(sizes[:n]), sum(sizes[: n - 1]), every)
    held = [t for t, _ in cps.held]
    # the session's first checkpoint (the end of the head) stays; what the thinning left is the newest request's
    assert held[0] == 248
    assert len(held) < 4 and all(t > sum(sizes[:-1]) - 1 for t in held[1:])
    # a fold that changes the prompt right after the head restarts from there
    assert cps.restart(600) == 248


def test_checkpoints_are_a_local_engines_and_exclude_shifting():
    with pytest.raises(ValueError, match="only a local engine keeps context checkpoints"):
        PriceSheet.model_validate({**get_price_sheet("openai").model_dump(), "checkpoints": 32})
    with pytest.raises(ValueError, match="reuses_shifted_kv"):
        PriceSheet.model_validate({**get_price_sheet("local-reuse").model_dump(), "checkpoints": 32})
