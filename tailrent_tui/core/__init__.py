"""The engine: plain, synchronous, deterministic Python.

Nothing here imports textual, httpx or aiofiles (tests/tooling/test_core_purity.py
enforces it), so every ladder rule is testable with plain function calls.
"""
