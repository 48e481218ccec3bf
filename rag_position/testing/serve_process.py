"""``rag-position serve`` (vLLM) in a child process, started and stopped as a user would.

For the tests (the root ``conftest.py``'s ``vllm_server`` fixtures) and the benchmarks
(``benchmarks/load.py``), which need a real vLLM server on 127.0.0.1 and must never
leave one behind::

    with ServeProcess(["--model", "embedded"]).start(timeout=900) as server:
        model = load_model(server.spec)

The command is ``python -m rag_position.cli serve ARGS --host 127.0.0.1 --port 0
--dtype float32 --max-model-len 4096`` (the window and dtype the tests compare against
the local backend); its stdout is read for the ``--model openai:...`` line that
``serve`` prints when vLLM answers, its stderr (vLLM's log) goes to a file. ``stop``
sends Ctrl-C (SIGINT), as a user stops it, and kills the process group after 60 s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

SPEC = re.compile(r"--model (openai:(http://[^\s]+/v1)/([^\s]+))")


class ServeStartError(RuntimeError):
    """``rag-position serve`` ended, or printed no spec in time; the message ends with its log."""


class ServeProcess:
    """One ``rag-position serve`` child process (see the module docstring).

    ``spec`` (``openai:http://127.0.0.1:PORT/v1/NAME``), ``base_url``
    (``http://127.0.0.1:PORT/v1``) and ``name`` are set by :meth:`start`.
    """

    def __init__(
        self,
        args: Sequence[str] = (),
        *,
        dtype: str = "float32",
        max_model_len: int = 4096,
        log: Path | None = None,
    ) -> None:
        self.command = [
            sys.executable, "-m", "rag_position.cli", "serve", *args, "--host", "127.0.0.1",
            "--port", "0", "--dtype", dtype, "--max-model-len", str(max_model_len),
        ]  # fmt: skip
        self.log = log or Path(tempfile.mkdtemp(prefix="rag-position-serve-")) / "serve.log"
        self.process: subprocess.Popen[str] | None = None
        self.spec = self.base_url = self.name = ""

    def start(self, timeout: float = 900.0) -> ServeProcess:
        """Start the server and wait (at most ``timeout`` s) for its spec; returns ``self``."""
        with open(self.log, "w") as err:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
            )
        found: list[re.Match[str]] = []
        process = self.process

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                match = SPEC.search(line)
                if match and not found:
                    found.append(match)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        try:
            while not found and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
        except BaseException:  # Ctrl-C while waiting: its own session never gets it
            self.stop()
            raise
        if not found:
            status = process.poll()
            self.stop()
            said = "exit " + str(status) if status is not None else f"nothing in {timeout:.0f} s"
            raise ServeStartError(
                f"`rag-position serve` did not print a spec ({said}):\n{self.log_text(25)}"
            )
        self.spec, self.base_url, self.name = found[0].groups()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self, lines: int) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Ctrl-C (SIGINT), as a user stops it; the process group is killed after 60 s.

        Were only the CLI killed, vLLM would still end: it gets SIGTERM when its parent dies.
        """
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["SPEC", "ServeProcess", "ServeStartError"]
