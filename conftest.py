"""Test-session exit for every test folder (tests/, integrations/*/tests, cookbooks).

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
"""

from __future__ import annotations

import os
import sys

import pytest

_session: pytest.Session | None = None


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
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
