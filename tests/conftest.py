"""What every test gets: a clean environment, a check on ERROR log lines, and its tier.

- **Hermetic.** Every ``MEMFS_*`` variable is removed from the environment
  before anything is collected, for this process and every subprocess a
  test starts: what a developer exports for their own daemon
  (``MEMFS_STATE_DIR``, ``MEMFS_STORE``, ...) never reaches a test, which
  sets what it needs itself (``monkeypatch.setenv`` or ``env=``).
- **ERROR lines fail the test** (after S3QL's ``pytest_checklogs``): a log
  record at ERROR or above that the test did not declare with
  ``@pytest.mark.error_log("regex", ...)`` fails it, and so does a declared
  pattern that never matched, so a declaration cannot outlive its cause.
- **No system state.** A test that leaves the daemon's default state dir
  (``/var/lib/memfs``, where a store key would go by default) behind where
  there was none fails: tests name their own folders and key files.
- **Tiers.** Tests that really mount FUSE are marked ``fuse`` and ``slow``
  automatically (their module uses the mount helpers), and so are tests
  that drive a browser ``browser`` and ``slow`` (they use the ``browser``
  fixture, the one way tests/test_web_browser.py starts chromium):
  ``pytest -m "not fuse and not browser"`` is the fast tier. A test that
  mounts without the mark fails, so the fast tier never mounts.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator

import pytest

from memfs.core.defaults import DEFAULT_STATE_DIR
from tests import daemon_harness

# Names whose use in a test module means it mounts (the module is read, not run).
MOUNTS = ("require_fuse", "running_daemon", "mounted_daemon", "memfs_daemon", "DaemonProcess")
# The fixture a test drives chromium through (tests/test_web_browser.py).
BROWSER_FIXTURE = "browser"

_outside: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    for name in [name for name in os.environ if name.startswith("MEMFS_")]:
        _outside[name] = os.environ.pop(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    os.environ.update(_outside)


def _mounts(module_file: str) -> bool:
    with open(module_file, encoding="utf-8") as source:
        text = source.read()
    return any(re.search(rf"\b{name}\b", text) for name in MOUNTS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: dict[str, bool] = {}
    for item in items:
        path = str(item.path)
        if path not in seen:
            seen[path] = _mounts(path)
        if seen[path]:
            item.add_marker(pytest.mark.fuse)
            item.add_marker(pytest.mark.slow)
        if BROWSER_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a module-scoped one may be what mounts.
    daemon_harness.MOUNT_ALLOWED = item.get_closest_marker("fuse") is not None


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _text(record: logging.LogRecord) -> str:
    return f"{record.name}: {record.getMessage()}"


@pytest.fixture(autouse=True)
def check_error_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test on an ERROR log record it did not declare with ``error_log``."""
    expected = [
        re.compile(pattern)
        for marker in request.node.iter_markers("error_log")
        for pattern in marker.args
    ]
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
    lines = [_text(record) for record in handler.records]
    unexpected = [line for line in lines if not any(p.search(line) for p in expected)]
    unused = [p.pattern for p in expected if not any(p.search(line) for line in lines)]
    if unexpected:
        pytest.fail("unexpected ERROR log lines:\n" + "\n".join(unexpected), pytrace=False)
    if unused:
        pytest.fail(f"declared ERROR log lines never logged: {unused}", pytrace=False)


@pytest.fixture(autouse=True)
def never_touches_system_state() -> Iterator[None]:
    """Fail a test that made the daemon's default state dir (a key file there, say)."""
    existed = os.path.lexists(DEFAULT_STATE_DIR)
    yield
    if not existed and os.path.lexists(DEFAULT_STATE_DIR):
        shutil.rmtree(DEFAULT_STATE_DIR)  # made by this test: gone, so the next is checked too
        pytest.fail(f"the test made {DEFAULT_STATE_DIR}, system state", pytrace=False)


# The throwaway PostgreSQL server, shared by the whole session (tests/postgres_fixtures.py).
from tests.postgres_fixtures import postgres_databases as postgres_databases  # noqa: E402
from tests.postgres_fixtures import postgres_key_file as postgres_key_file  # noqa: E402
from tests.postgres_fixtures import postgres_server as postgres_server  # noqa: E402
from tests.postgres_fixtures import sql_opener as sql_opener  # noqa: E402
