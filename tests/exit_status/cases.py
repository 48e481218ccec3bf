"""Run only by tests/test_exit_status.py (the name keeps it out of normal collection)."""

import atexit
import os
import sys

atexit.register(lambda: print("interpreter finalization ran", file=sys.stderr))


def test_passes() -> None:
    assert True


def test_fails_when_asked() -> None:
    assert os.environ.get("EXIT_STATUS_CASE") != "fail", "this failure is the point"
