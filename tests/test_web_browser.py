"""The Memory tab in a real browser: Debian's chromium, driven by Playwright, against ``memfs web``.

Each scenario clicks and types as a person would, over a real server (a
``memfs web`` process on a SQLite store holding :mod:`tests.web_world`),
then opens the store itself to check what the clicks did, not only what the
page says. Every page visited is a screenshot in ``artifacts/screenshots/``.
One browser serves the module; each test has a fresh context (no cookie of
another test) and a fresh server and store. The rule that decides whether
these tests run, skip or fail (:func:`tests.web_browser.browser_verdict`)
is tested first, without a browser.

Tests that use the ``browser`` fixture are marked ``browser`` and ``slow``
by tests/conftest.py, so the fast tier (``-m "not fuse and not browser"``)
never starts chromium. The forms' rules themselves are pinned without a
browser in tests/test_web_pages.py.
"""

from __future__ import annotations

import http.server
import inspect
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, overload

import httpx
import pytest

from memfs.core.models import AuditEntry, Trace, TraceFile, TraceMount
from memfs.core.review import WaitingChange
from memfs.stores.sqlite import SqliteStore
from tests import web_browser
from tests.web_browser import (
    Served,
    Shots,
    browser_verdict,
    free_port,
    in_store,
    launch,
    served_memory,
)
from tests.web_world import DANA_ME, ORG, PROMPT, RULES

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page
    from playwright.sync_api._generated import LocatorAssertions, PageAssertions

ROOT = Path(__file__).resolve().parent.parent


@overload
def expect(target: Page) -> PageAssertions: ...
@overload
def expect(target: Locator) -> LocatorAssertions: ...
def expect(target: Page | Locator) -> PageAssertions | LocatorAssertions:
    # Imported on use: without playwright this module still loads, so the
    # verdict below can skip (or, under CI, fail) rather than break collection.
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


# -- whether the browser tests run (no browser needed) -----------------------------------


def test_the_browser_tests_run_when_chromium_and_playwright_are_here(tmp_path: Path) -> None:
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    assert browser_verdict({}, chromium, True).outcome == "run"
    assert browser_verdict({"CI": "true"}, chromium, True).outcome == "run"


@pytest.mark.parametrize("ci", [None, "", "0", "false"])
def test_a_missing_chromium_or_playwright_skips_outside_ci(tmp_path: Path, ci: str | None) -> None:
    env = {} if ci is None else {"CI": ci}
    not_executable = tmp_path / "chromium"
    not_executable.write_text("")
    for chromium, has_playwright in [
        (tmp_path / "missing", True),
        (not_executable, True),
        (tmp_path, True),  # a folder is no browser
        (not_executable, False),
    ]:
        verdict = browser_verdict(env, chromium, has_playwright)
        assert verdict.outcome == "skip", (chromium, has_playwright)
        assert "scripts/setup.sh" in verdict.why
    chromium = tmp_path / "chromium"
    chromium.chmod(0o755)
    verdict = browser_verdict(env, chromium, False)
    assert verdict.outcome == "skip" and "playwright" in verdict.why
    assert str(chromium) not in verdict.why


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_under_ci_a_missing_chromium_or_playwright_fails_naming_what_is_missing(
    tmp_path: Path, ci: str
) -> None:
    missing = tmp_path / "chromium"
    verdict = browser_verdict({"CI": ci}, missing, True)
    assert verdict.outcome == "fail"
    assert f"{missing} (apt-get install chromium)" in verdict.why
    verdict = browser_verdict({"CI": ci}, missing, False)
    assert verdict.outcome == "fail" and "playwright" in verdict.why


@pytest.mark.parametrize(("ci", "outcome"), [(None, "1 skipped"), ("true", "1 failed")])
def test_a_test_needing_a_missing_chromium_is_skipped_or_under_ci_failed(
    tmp_path: Path, ci: str | None, outcome: str
) -> None:
    # The verdict as pytest reports it, in a pytest of its own with the
    # browser's path pointed at nothing.
    (tmp_path / "test_needs_chromium.py").write_text(
        "from pathlib import Path\n"
        "from tests.web_browser import require_browser\n"
        "def test_needs_chromium():\n"
        "    require_browser(chromium=Path('/nonexistent/chromium'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
         "test_needs_chromium.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert outcome in done.stdout, done.stdout + done.stderr
    assert "/nonexistent/chromium (apt-get install chromium)" in done.stdout
    if ci is not None:
        assert "CI is set" in done.stdout


def _collected(marks: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marks, "tests/test_web_browser.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: none collected
    return {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if "::" in line}


def test_the_tests_that_drive_chromium_are_marked_browser_and_slow_and_no_others() -> None:
    scenarios = {
        name
        for name, test in globals().items()
        if name.startswith("test_") and "page" in inspect.signature(test).parameters
    }
    assert len(scenarios) == 6
    assert _collected("browser") == _collected("browser and slow") == scenarios
    fast = _collected("not fuse and not browser")
    assert "test_the_browser_tests_run_when_chromium_and_playwright_are_here" in fast
    assert not fast & scenarios


class _NotOurs(http.server.BaseHTTPRequestHandler):
    """Another web server on the port: it answers every page, and knows no token of ours."""

    def do_GET(self) -> None:
        self.send_response(401 if self.path.startswith("/api/") else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.slow
def test_a_port_another_server_took_is_left_for_a_fresh_one_and_never_clicked_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = http.server.HTTPServer(("127.0.0.1", 0), _NotOurs)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    taken = other.server_address[1]
    ports = iter([taken])
    monkeypatch.setattr(web_browser, "free_port", lambda: next(ports, free_port()))
    try:
        with served_memory(tmp_path) as served:
            assert not served.url.endswith(f":{taken}")
            me = httpx.get(
                served.url + "/api/v1/me",
                headers={"Authorization": f"Bearer {served.tokens['member']}"},
                timeout=10,
            )
            assert me.json()["id"] == "u_member"
        assert web_browser.PORT_TAKEN in (tmp_path / "memfs-web-1.log").read_text()
        assert served.process.returncode is not None  # stopped at the end of the block
    finally:
        other.shutdown()
        other.server_close()
        thread.join()


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    web_browser.require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch(playwright)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with served_memory(tmp_path) as running:
        yield running


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    return Shots(request.node.name)


def sign_in(page: Page, served: Served, who: str, shots: Shots, path: str) -> None:
    """Open ``path`` signed out, land on sign-in, type ``who``'s token, arrive at ``path``."""
    page.goto(served.url + path)
    expect(page).to_have_url(re.compile(r"/login\?next="))
    shots.take(page, "login")
    page.get_by_label("Token").fill(served.tokens[who])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(served.url + path)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def audit_of(served: Served) -> list[AuditEntry]:
    async def look(store: SqliteStore) -> list[AuditEntry]:
        return await store.audit()

    return in_store(served.db, look)


def acts(served: Served, *actions: str) -> list[tuple[str, str | None, str | None]]:
    """(action, actor, target) of the audit entries of these actions, oldest first."""
    return [
        (e.action, e.actor.id if e.actor else None, e.target)
        for e in audit_of(served)
        if e.action in actions
    ]


def rules_files(served: Served) -> dict[str, bytes]:
    async def look(store: SqliteStore) -> dict[str, bytes]:
        return await store.files(RULES)

    return in_store(served.db, look)


def change_of(served: Served) -> WaitingChange:
    async def look(store: SqliteStore) -> WaitingChange:
        return await store.get_change(served.change)

    return in_store(served.db, look)


# -- the scenarios -----------------------------------------------------------------------


def test_a_reviewer_reads_danas_diff_approves_one_file_rejects_the_other_and_sees_it_live(
    page: Page, served: Served, shots: Shots
) -> None:
    sign_in(page, served, "member", shots, "/review")
    change = page.locator(f"#change-{served.change}")
    expect(change.locator("blockquote.prompt")).to_have_text(PROMPT)
    expect(change.locator(".diff ins", has_text="+cut-off 17:00")).to_be_visible()
    expect(change.locator(".diff ins", has_text="+bee")).to_be_visible()
    new_md = change.locator(".change-file", has_text="new.md").locator("pre.diff")
    assert new_md.inner_text().splitlines() == [
        "--- /dev/null",
        "+++ b/new.md",
        "@@ -0,0 +1 @@",
        "+cut-off 17:00",
    ]
    shots.take(page, "review")

    change.get_by_role("checkbox", name="b.md").uncheck()
    expect(change.get_by_role("checkbox", name="new.md")).to_be_checked()
    change.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_have_text("Approved.")
    shots.take(page, "review-approved")
    assert rules_files(served) == {"a.md": b"one\n", "new.md": b"cut-off 17:00\n"}
    waiting = change_of(served)
    assert waiting.state == "waiting" and set(waiting.files) == {"b.md"}

    left = page.locator(f"#change-{served.change}")
    expect(left.get_by_role("checkbox")).to_have_count(1)
    expect(left.get_by_role("checkbox", name="b.md")).to_be_checked()
    left.get_by_role("button", name="Reject").click()
    expect(page.get_by_role("status")).to_have_text("Rejected.")
    expect(page.get_by_text("No change is waiting for review.")).to_be_visible()
    shots.take(page, "review-rejected")
    assert change_of(served).state == "rejected"
    assert rules_files(served) == {"a.md": b"one\n", "new.md": b"cut-off 17:00\n"}
    assert acts(served, "approve", "reject") == [
        ("approve", "u_member", served.change),
        ("reject", "u_member", served.change),
    ]

    page.get_by_role("link", name="Org memory").click()
    expect(page).to_have_url(served.url + "/org")
    shots.take(page, "org")
    page.get_by_role("link", name="rules").click()
    page.get_by_role("link", name="new.md").click()
    expect(page).to_have_url(served.url + "/org/rules/files/new.md")
    expect(page.locator("pre.text")).to_have_text("cut-off 17:00\n")
    trail = page.locator("table.trail tbody tr")
    expect(trail).to_have_count(1)
    expect(trail.first).to_contain_text(PROMPT)
    expect(trail.first).to_contain_text("u_member")  # approved by
    shots.take(page, "file")


def test_a_member_edits_a_file_and_restores_the_earlier_revision(
    page: Page, served: Served, shots: Shots
) -> None:
    sign_in(page, served, "member", shots, "/org/rules/files/a.md")
    expect(page.locator("pre.text")).to_have_text("one\n")
    shots.take(page, "file")

    page.get_by_text("Edit", exact=True).click()
    text = page.get_by_label("Text")
    expect(text).to_have_value("one\n")
    text.fill("two\nthree\n")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    expect(page.locator("pre.text")).to_have_text("two\nthree\n")
    shots.take(page, "file-saved")
    # The browser posts the textarea's line breaks as CRLF: the store keeps LF.
    assert rules_files(served)["a.md"] == b"two\nthree\n"

    restore = page.get_by_role("button", name="Restore")
    expect(restore).to_have_count(1)  # the one earlier revision
    restore.click()
    expect(page.get_by_role("status")).to_have_text("Restored.")
    expect(page.locator("pre.text")).to_have_text("one\n")
    expect(page.locator("table.trail tbody tr")).to_have_count(3)
    shots.take(page, "file-restored")
    assert rules_files(served)["a.md"] == b"one\n"

    async def look(store: SqliteStore) -> list[tuple[str, str | None, str | None]]:
        return [
            (r.provenance.origin, r.provenance.by.id if r.provenance.by else None, r.sha256)
            for r in await store.history(RULES, "a.md")
        ]

    first, edit, restored = in_store(served.db, look)
    assert edit[:2] == restored[:2] == ("edited", "u_member")
    assert restored[2] == first[2] != edit[2]
    assert acts(served, "put", "restore") == [
        ("put", "u_member", "a.md"),
        ("restore", "u_member", "a.md"),
    ]


def test_a_viewer_sees_no_approve_button_and_signing_out_sends_the_browser_to_sign_in(
    page: Page, served: Served, shots: Shots
) -> None:
    sign_in(page, served, "viewer", shots, "/review")
    change = page.locator(f"#change-{served.change}")
    expect(change.locator("blockquote.prompt")).to_have_text(PROMPT)
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_role("button", name="Reject")).to_have_count(0)
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    shots.take(page, "review")

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(served.url + "/login?done=signed-out")
    expect(page.get_by_role("status")).to_have_text("Signed out.")
    expect(page.get_by_label("Token")).to_be_visible()
    shots.take(page, "signed-out")
    assert not [c for c in page.context.cookies() if c["name"] == "memfs_session"]
    page.goto(served.url + "/review")  # the session is over: back to sign-in
    expect(page).to_have_url(re.compile(r"/login\?next=%2Freview$"))

    assert change_of(served).state == "waiting"
    assert rules_files(served) == {"a.md": b"one\n"}
    assert acts(served, "sign-in", "sign-in-failed", "approve", "reject") == [
        ("sign-in", "u_viewer", None)
    ]


def test_a_wrong_or_revoked_token_is_refused_and_signs_nobody_in(
    page: Page, served: Served, shots: Shots
) -> None:
    page.goto(served.url + "/login")
    shots.take(page, "login")
    for step, token in [("unknown", "not a token of this store"), ("revoked", "revoked")]:
        page.get_by_label("Token").fill(served.tokens.get(token, token))
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_have_text("That token is unknown or revoked.")
        expect(page.get_by_label("Token")).to_be_visible()
        shots.take(page, f"login-{step}")
    assert not [c for c in page.context.cookies() if c["name"] == "memfs_session"]
    page.goto(served.url + "/review")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Freview$"))

    entries = [e for e in audit_of(served) if e.action.startswith("sign-in")]
    assert [(e.action, e.actor) for e in entries] == [("sign-in-failed", None)] * 2
    assert ORG not in {e.org for e in entries}  # a failed sign-in belongs to no org


def test_an_admin_opens_a_persons_memory_on_people_and_the_audit_log_shows_it(
    page: Page, served: Served, shots: Shots
) -> None:
    sign_in(page, served, "admin", shots, "/people")
    dana = page.locator("#person-u_dana")
    expect(dana.get_by_role("heading", name="u_dana")).to_be_visible()
    bay = dana.locator("table.bays tbody tr td")
    expect(bay.nth(0)).to_have_text("me")
    expect(bay.nth(1)).to_have_text("4")
    expect(page.get_by_text("pref")).to_have_count(0)  # closed until "Open"
    shots.take(page, "people")
    assert acts(served, "open") == []

    dana.get_by_role("button", name="Open").click()
    expect(page.get_by_role("heading", name="u_dana's memory")).to_be_visible()
    expect(page.locator(".person-file code", has_text="p.md")).to_be_visible()
    expect(page.locator("pre.text")).to_have_text("pref")
    shots.take(page, "person-opened")
    assert acts(served, "open") == [("open", "u_admin", "u_dana")]

    page.get_by_role("link", name="audit log").click()
    expect(page).to_have_url(served.url + "/people/audit")
    newest = page.locator("table.audit tbody tr").first
    expect(newest.locator("td").nth(1)).to_have_text("u_admin (admin)")
    expect(newest.locator("td").nth(2)).to_have_text("open")
    expect(newest.locator("td").nth(4)).to_have_text("u_dana")
    shots.take(page, "audit")
    [entry] = [e for e in audit_of(served) if e.action == "open"]
    assert (entry.org, entry.target) == (ORG, "u_dana")
    assert entry.actor is not None and (entry.actor.id, entry.actor.role) == ("u_admin", "admin")


def test_a_viewer_follows_a_change_from_the_inbox_to_its_session_story_carried_map_and_life(
    page: Page, served: Served, shots: Shots
) -> None:
    async def turn(store: SqliteStore) -> None:
        # What the daemon records of Dana's turn s1/t1: it opened a.md and mounted her memory.
        rules = await store.load(RULES, "s1")
        me = await store.load(DANA_ME, "s1")
        mount = {"read_only": False, "from_last_known_copy": False, "status": "saved"}
        await store.record_trace(
            Trace(
                session="s1",
                turn="t1",
                prompt=PROMPT,
                mounts={
                    "rules": TraceMount.model_validate(
                        {**mount, "ref": RULES, "cursor": rules.cursor, "snapshot": {}}
                    ),
                    "me": TraceMount.model_validate(
                        {**mount, "ref": DANA_ME, "cursor": me.cursor, "snapshot": {}}
                    ),
                },
                files={"rules/a.md": TraceFile(read=rules.revisions["a.md"], opened=True)},
            )
        )

    in_store(served.db, turn)
    sign_in(page, served, "viewer", shots, "/inbox")
    waiting = page.locator(f"#inbox-{served.change}")
    expect(waiting.locator("blockquote.prompt")).to_have_text(PROMPT)
    expect(page.get_by_text("Nothing to look at: every space's files fit")).to_be_visible()
    shots.take(page, "inbox")
    waiting.get_by_role("link", name=f"Change {served.change}").click()
    expect(page).to_have_url(f"{served.url}/review#change-{served.change}")

    page.locator(f"#change-{served.change}").get_by_role("link", name="s1").click()
    expect(page).to_have_url(served.url + "/sessions/s1")
    line = page.locator("#turn-t1")
    expect(line.locator("tr.mount-org")).to_contain_text("a.md")
    expect(line.locator("tr.mount-user")).to_contain_text("a person's memory · me")
    shots.take(page, "session")

    line.get_by_role("link", name="Carried").click()
    expect(page).to_have_url(served.url + "/turns/t1/carried?session=s1")
    expect(page.locator("#mount-rules a.tile.origin-opened")).to_have_text("a.md")
    expect(page.locator("#mount-me")).to_contain_text("1 file carried")
    expect(page.get_by_role("button", name="Open")).to_have_count(0)  # a viewer's page
    shots.take(page, "carried")

    page.locator("#mount-rules a.tile", has_text="a.md").click()
    expect(page).to_have_url(served.url + "/life?space=rules&path=a.md")
    expect(page.get_by_text("1 turn carried it, 1 opened it.")).to_be_visible()
    chart = page.get_by_role("img", name=re.compile("1 turn carried it and 1 opened it"))
    expect(chart).to_be_visible()
    shots.take(page, "life")
    content = page.content()
    assert "u_dana" not in content and "p.md" not in content
    assert acts(served, "open") == []
