"""FlushFailures: when failing flushes make the store count as failing, and what the
reason says (never a path)."""

from __future__ import annotations

import errno

from backends.core.errors import NoSuchBucket, ServiceUnavailable
from gateway.cache.flush_health import FlushFailures, describe


def test_failing_flushes_are_a_problem_while_data_waits() -> None:
    failures = FlushFailures(after_s=0.0)
    assert failures.problem(pending=True) is None
    failures.failed(ServiceUnavailable("The upstream service cannot be reached."))
    problem = failures.problem(pending=True)
    assert problem is not None and problem.startswith("flushes to the backend failing for ")
    assert "ServiceUnavailable: The upstream service cannot be reached." in problem
    assert failures.problem(pending=False) is None  # nothing waits: nothing to report
    failures.succeeded()
    assert failures.problem(pending=True) is None


def test_not_before_the_delay() -> None:
    failures = FlushFailures(after_s=3600.0)
    failures.failed(ServiceUnavailable())
    assert failures.problem(pending=True) is None


def test_errors_of_one_record_are_left_to_the_quarantine() -> None:
    failures = FlushFailures(after_s=0.0)
    failures.failed(NoSuchBucket("gone"))
    assert failures.problem(pending=True) is None


def test_the_reason_names_no_path() -> None:
    exc = OSError(errno.EROFS, "Read-only file system", "/srv/store/.squall/tmp/x")
    assert describe(exc) == "OSError EROFS"
    assert describe(RuntimeError("/secret/path")) == "RuntimeError"
