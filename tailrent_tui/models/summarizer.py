"""The model as a summarizer: a fold's summary asked of the chat model itself.

The request is aligned with the conversation's cache (`SummaryContext`): the
conversation exactly as the last request sent it (same system prompt, tools,
messages and options, so the chat template renders the same tokens), then one
final user message that names the span by position and by its first words and
carries the budget. On an engine that keeps the previous prompt's KV
(llama.cpp, Ollama) only that last message is new; on a priced API the span is
read at the cache-read price. When the conversation ends on a user message, the
instruction is appended to it instead (several chat templates refuse two user
messages in a row); that costs the re-read of that one message.

Without a context (a span summarized on its own) the request is the old one: a
summarizer system prompt, then the span as one text.

What the model writes is returned as it is, for core's `check_summary` to judge;
a reply that speaks of the conversation after the span and not of the span (the
model answered the user instead of summarizing) comes back with an error, so the
policy falls back and says why. The words are data: `data/summary_prompts.toml`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from tailrent_tui.core.summarize import Summary, role_content
from tailrent_tui.text import model_label

from .base import ChatModel, TextDelta, ToolSpec, Usage, WireMessage

#: words quoted from each end of the span to name it
QUOTED_WORDS = 4


@cache
def summary_prompts() -> dict[str, str]:
    """The packaged prompts (`aligned`, `standalone`)."""
    text = resources.files("tailrent_tui").joinpath("data", "summary_prompts.toml").read_text(encoding="utf-8")
    return {k: str(v) for k, v in tomllib.loads(text).items()}


SUMMARY_PROMPT = summary_prompts()["standalone"]
ALIGNED_PROMPT = summary_prompts()["aligned"]


@dataclass(frozen=True)
class SummaryContext:
    """The conversation as a request sends it, and where the span sits in it.

    `positions` are indices into `messages` of the span's messages (the system
    prompt, when there is one, is `messages[0]`).
    """

    messages: list[WireMessage]
    positions: tuple[int, ...]
    tools: list[ToolSpec] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the conversation after the request's end (the turn in flight): not sent, but a reply
    #: that speaks of it answered the conversation instead of summarizing the span
    later: list[WireMessage] = field(default_factory=list)
    #: the instruction goes as its own message even after a user message: the request was cut after
    #: the span near the window, and appended to the span's last message it would read that message again
    apart: bool = False


def _quote(m: Any) -> str:
    role, content = role_content(m)
    if not content.strip() and isinstance(m, Mapping) and m.get("tool_calls"):
        content = "[tool call: " + ", ".join(str(c.get("name", "")) for c in m["tool_calls"]) + "]"
    words = content.replace('"', "'").split()
    text = " ".join(words[:QUOTED_WORDS])
    return text + ("..." if len(words) > QUOTED_WORDS else "") if text else f"({role}, empty)"


#: how the wire starts a context note (agent/wire.py): a fold summary, a pointer, a ledger
CONTEXT_NOTE = "[context note]\n"


def aligned_instruction(context: SummaryContext, budget: int | None) -> str:
    """The final user message: which messages to summarize, and in how many tokens."""
    offset = 1 if context.messages and context.messages[0]["role"] == "system" else 0
    positions = sorted(context.positions)
    first, last = positions[0], positions[-1]
    return ALIGNED_PROMPT.format(
        first=first + 1 - offset,
        last=last + 1 - offset,
        count=len(positions),
        start=_quote(context.messages[first]),
        end=_quote(context.messages[last]),
        budget=budget if budget is not None else "a few hundred",
    )


def asks_apart(context: SummaryContext) -> bool:
    """The instruction goes as its own user message (the context ends on a reply, or on a context
    note: a ledger a fold just carried, which the engine holds and must not read again with the
    instruction appended): the fold can then keep it and the summary as a question and its answer,
    the tokens the engine cached. A template that refuses two user messages in a row gets them
    joined by the model (`alternated`)."""
    if context.apart or not context.messages or context.messages[-1]["role"] != "user":
        return True
    return str(context.messages[-1].get("content", "")).startswith(CONTEXT_NOTE)


def aligned_messages(context: SummaryContext, budget: int | None) -> list[WireMessage]:
    """The conversation, then the instruction: as its own user message, or appended to a
    last user message (no template then sees two user messages in a row)."""
    messages = [dict(m) for m in context.messages]
    instruction = aligned_instruction(context, budget)
    if not asks_apart(context):
        last = messages[-1]
        last["content"] = f"{last.get('content', '')}\n\n{instruction}"
    else:
        messages.append({"role": "user", "content": instruction})
    return messages


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{4,}")


def _words(text: str) -> set[str]:
    return {w.lower().strip(".-") for w in _WORD.findall(text)}


def replied_instead(text: str, span: Sequence[Any], after: Sequence[Any]) -> bool:
    """Did the model answer the conversation instead of summarizing the span?

    A summary's words come from its span. A reply whose distinctive words
    (5 letters or more) are mostly not in the span, and found more often in the
    messages after it, speaks of the conversation's end: it continues it.
    """
    mine = _words(text)
    if len(mine) < 6:
        return False
    in_span = len(mine & _words("\n".join(role_content(m)[1] for m in span))) / len(mine)
    later = len(mine & _words("\n".join(role_content(m)[1] for m in after))) / len(mine)
    return in_span < 0.4 and later > in_span


class ModelSummarizer:
    """Summarizes a span through a ``ChatModel``, in the conversation's own cached context when it is given.

    Keeps what the model keeps; the fact guard checks the result. Loses what the
    model drops, which is why the guard exists.
    """

    def __init__(self, model: ChatModel, *, prompt: str = SUMMARY_PROMPT, options: Mapping[str, Any] | None = None):
        self.model = model
        self.prompt = prompt
        self.options = dict(options) if options is not None else {"temperature": 0}
        self.last_usage: Usage | None = None

    @property
    def name(self) -> str:
        # read each time: a server names its model only once asked (resolve_name, the first reply)
        # the model's name, not the path of the GGUF file a llama.cpp server names it by
        return f"model:{model_label(self.model.name) if self.model.name else 'the server model'}"

    def request_messages(
        self, messages: Sequence[Any], budget: int | None = None, context: SummaryContext | None = None
    ) -> list[WireMessage]:
        """What the summary request sends: the context and the instruction, else the span on its own."""
        if context is not None and context.positions:
            return aligned_messages(context, budget)
        transcript = "\n\n".join("[{}] {}".format(*role_content(m)) for m in messages)
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": f"Summarize this part of the conversation:\n\n{transcript}"},
        ]

    async def asummarize(
        self, messages: Sequence[Any], budget: int | None = None, context: SummaryContext | None = None
    ) -> Summary:
        """The model's summary of `messages`, capped at `budget` tokens (max_tokens).

        With a context, the request is the conversation's (its tools and options
        too) plus the instruction. A server error is raised (the caller falls
        back); what the model wrote is returned as it is, marked truncated when
        it stopped at the budget, for core's `check_summary` to judge.
        """
        aligned = context is not None and bool(context.positions)
        options = {**(context.options if aligned and context is not None else {}), **self.options}
        if budget is not None:
            options["max_tokens"] = budget
        tools = context.tools if aligned and context is not None else None
        parts = []
        self.last_usage = None
        request = self.request_messages(messages, budget, context)
        async for chunk in self.model.stream(request, tools=tools, options=options):
            if isinstance(chunk, TextDelta):
                parts.append(chunk.text)
            elif isinstance(chunk, Usage):
                self.last_usage = chunk
        truncated = self.last_usage is not None and self.last_usage.truncated
        text = "".join(parts).strip()
        if aligned and context is not None and text and not truncated:
            after = context.messages[max(context.positions) + 1 :] + context.later
            if replied_instead(text, messages, after):
                return Summary(
                    text=text,
                    by=self.name,
                    error="it answered the conversation instead of summarizing the span (its words are not the span's)",
                )
        asked = aligned_instruction(context, budget) if aligned and context is not None and asks_apart(context) else None
        return Summary(text=text, by=self.name, truncated=truncated, asked=asked)
