"""What the browser tests stand on: Debian's chromium, a real ``memfs web``, screenshots.

- **Chromium or not.** :func:`browser_verdict` is the one rule: the tests run
  when ``/usr/bin/chromium`` is an executable and Playwright imports; if
  either is missing they are skipped, unless ``CI`` is set (as
  :func:`memfs.testing.mount.under_ci` reads it), where they fail naming
  what is missing and how to get it (``scripts/setup.sh``). A browser is
  never downloaded: Playwright launches Debian's chromium through
  ``executable_path``, with :data:`CHROMIUM_ARGS`.
- **A real server.** :func:`served_memory` writes the world of
  :mod:`tests.web_world` (``org_memory``) into a fresh SQLite file, starts
  ``memfs web --store sqlite:///... --listen 127.0.0.1:PORT`` as a process,
  waits until it answers as that store (it knows a token of it), and stops
  it when the block ends, however it ends. The process writes its output to
  a log file beside the store; a traceback in it fails the test (the server
  hid an error behind a page). :func:`in_store` opens the same file from the test to check what
  the clicks did to the store.
- **Screenshots.** :class:`Shots` saves a full-page PNG of every page a test
  visits to ``artifacts/screenshots/`` (git-ignored, kept by CI as
  artifacts), named ``TEST-NN-STEP.png``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import httpx
import pytest
import trio

from memfs.stores.sqlite import SqliteStore
from memfs.testing.mount import under_ci
from tests.web_world import Memory, org_memory

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Headless and quiet: no sandbox (the tests run as root), no GPU, and none of
# chromium's own traffic (updates, sync, field trials) leaves the machine.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
SERVER_START_SECONDS = 30.0
SERVER_START_ATTEMPTS = 3  # a port taken by another process between looking and binding
SERVER_STOP_SECONDS = 15.0
MEMFS = [sys.executable, "-m", "memfs.cli"]

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """Whether the browser tests run here: ``run``, or ``skip``/``fail`` and why."""

    outcome: Literal["run", "skip", "fail"]
    why: str = ""


def browser_verdict(env: Mapping[str, str], chromium: Path, has_playwright: bool) -> Verdict:
    """The rule (see the module header): what is missing skips, or fails under CI."""
    missing = []
    if not (chromium.is_file() and os.access(chromium, os.X_OK)):
        missing.append(f"{chromium} (apt-get install chromium)")
    if not has_playwright:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if not missing:
        return Verdict("run")
    why = f"the browser tests need {' and '.join(missing)}; scripts/setup.sh installs both"
    return Verdict("fail" if under_ci(dict(env)) else "skip", why)


def require_browser(env: Mapping[str, str] | None = None, chromium: Path = CHROMIUM) -> None:
    """Skip or fail the test as :func:`browser_verdict` says; return if it can run."""
    has_playwright = importlib.util.find_spec("playwright") is not None
    verdict = browser_verdict(os.environ if env is None else env, chromium, has_playwright)
    if verdict.outcome == "skip":
        pytest.skip(verdict.why)
    if verdict.outcome == "fail":
        pytest.fail(f"CI is set and {verdict.why}", pytrace=False)


def launch(playwright: Playwright) -> Browser:
    """Debian's chromium, headless: never a browser Playwright would download."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
    )


# -- the server ----------------------------------------------------------------------


@dataclass
class Served:
    """A running ``memfs web`` over the world of :func:`tests.web_world.org_memory`."""

    url: str
    db: Path
    tokens: dict[str, str]  # by the names of tests.web_world.PEOPLE
    change: str  # Dana's waiting change on bank_17's rules
    process: subprocess.Popen[bytes]
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def in_store(db: Path, look: Callable[[SqliteStore], Awaitable[T]]) -> T:
    """``look`` at the SQLite file ``db`` through a store of its own, opened and closed here.

    For a sync test: it runs its own trio loop (pytest-trio runs sync tests
    outside any loop, and Playwright's sync API keeps its loop in a greenlet).
    """

    async def main() -> T:
        store = SqliteStore(db)
        try:
            return await look(store)
        finally:
            await store.aclose()

    return trio.run(main)


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_ours(url: str, token: str, process: subprocess.Popen[bytes], log: Path) -> bool:
    """True once the server at ``url`` is this one (it knows ``token``); False if it exited.

    Asking who ``token`` is, not just for a page: on a busy machine another
    server may take the port between :func:`free_port` and the bind, and it
    must never be the one the test clicks through.
    """
    deadline = time.monotonic() + SERVER_START_SECONDS
    while process.poll() is None:
        try:
            me = httpx.get(
                f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=5
            )
            if me.status_code == 200 and me.json().get("id") == "u_viewer":
                return True
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            _stop(process)
            pytest.fail(
                f"memfs web did not answer within {SERVER_START_SECONDS:.0f} s:\n{_tail(log)}",
                pytrace=False,
            )
        time.sleep(0.1)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SERVER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def served_memory(folder: Path) -> Iterator[Served]:
    """``memfs web`` over a fresh SQLite store in ``folder`` holding the web world."""
    db = folder / "memfs.db"

    async def prepare(store: SqliteStore) -> Memory:
        return await org_memory(store)

    memory = in_store(db, prepare)
    for attempt in range(1, SERVER_START_ATTEMPTS + 1):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = folder / f"memfs-web-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*MEMFS, "web", "--store", f"sqlite://{db}", "--listen", f"127.0.0.1:{port}"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if _wait_until_ours(url, memory.tokens["viewer"], process, log):
            break
        # ``memfs web`` names a taken port in its one-line start error (memfs.web.serve).
        if "port is already in use" not in _tail(log) or attempt == SERVER_START_ATTEMPTS:
            pytest.fail(f"memfs web exited ({process.returncode}):\n{_tail(log)}", pytrace=False)
    try:
        yield Served(url, db, memory.tokens, memory.change, process, log)
        assert process.poll() is None, f"memfs web died during the test:\n{_tail(log)}"
    finally:
        _stop(process)
    if re.search(r"^Traceback|\bERROR\b", log.read_text(encoding="utf-8", errors="replace"), re.M):
        pytest.fail(f"memfs web logged an error:\n{_tail(log)}", pytrace=False)


# -- screenshots ---------------------------------------------------------------------


class Shots:
    """Numbered full-page screenshots of one test: ``artifacts/screenshots/TEST-NN-STEP.png``."""

    def __init__(self, test: str, folder: Path = SCREENSHOTS) -> None:
        self.test = re.sub(r"[^A-Za-z0-9_-]+", "-", test)
        self.folder = folder
        self.taken: list[Path] = []
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob(f"{self.test}-*.png"):  # a rerun's shots replace the last run's
            old.unlink()

    def take(self, page: Page, step: str) -> Path:
        path = self.folder / f"{self.test}-{len(self.taken) + 1:02d}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path


__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "SCREENSHOTS",
    "Served",
    "Shots",
    "Verdict",
    "browser_verdict",
    "free_port",
    "in_store",
    "launch",
    "require_browser",
    "served_memory",
]
