"""Browser sessions: their bounds at and past each setting, and the constant-time secret check."""

from __future__ import annotations

import pydantic
import pytest

from memfs.web.sessions import SessionLimits, SessionTable, same_secret


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_web_session_max_seconds_after_sign_in_however_busy() -> None:
    clock = Clock()
    table = SessionTable(
        SessionLimits(web_session_idle_seconds=50, web_session_max_seconds=120), clock=clock
    )
    session = table.start("memfs_token")
    for _ in range(11):  # a request every 10 s keeps it from idling out...
        clock.now += 10
        assert table.get(session.id) is session
    clock.now += 9.9  # 119.9 s after sign-in: at the bound, still in
    assert table.get(session.id) is session
    clock.now += 0.1  # 120 s: past it
    assert table.get(session.id) is None and len(table) == 0


def test_an_idle_session_ends_and_others_are_swept_when_anyone_arrives() -> None:
    clock = Clock()
    table = SessionTable(SessionLimits(web_session_idle_seconds=30), clock=clock)
    old = table.start("memfs_a")
    clock.now = 29.9
    fresh = table.start("memfs_b")
    assert table.get(old.id) is old  # 29.9 s idle: still in, and seen again now
    clock.now = 29.9 + 30
    assert table.get("unknown") is None
    assert len(table) == 0 and table.get(fresh.id) is None


def test_web_max_sessions_is_held_and_the_one_idle_longest_goes_first() -> None:
    clock = Clock()
    table = SessionTable(SessionLimits(web_max_sessions=3), clock=clock)
    made = []
    for n in range(3):
        clock.now = n
        made.append(table.start(f"memfs_{n}"))
    clock.now = 5
    assert table.get(made[0].id) is made[0]  # the first is now the most recent
    table.start("memfs_3")
    assert len(table) == 3
    assert table.get(made[1].id) is None  # idle longest: gone
    assert table.get(made[0].id) is made[0] and table.get(made[2].id) is made[2]


def test_ending_a_session_and_odd_cookie_values() -> None:
    table = SessionTable(clock=Clock())
    session = table.start("memfs_x")
    for odd in (None, "", "x" * 10_000):
        assert table.get(odd) is None
        table.end(odd)
    table.end(session.id)
    assert table.get(session.id) is None
    assert "memfs_x" not in repr(session) and session.csrf not in repr(session)


def test_same_secret_refuses_anything_but_the_same_string() -> None:
    assert same_secret("abc", "abc")
    for other in ("abd", "", None, 7, ["abc"], "abc "):
        assert not same_secret("abc", other)


def test_one_token_signing_in_again_and_again_ends_only_its_own_oldest_sessions() -> None:
    # A person who loops sign-ins must not push everyone else out of the table.
    clock = Clock()
    table = SessionTable(
        SessionLimits(web_max_sessions=10, web_max_sessions_per_token=3), clock=clock
    )
    others = [table.start(f"memfs_other_{n}") for n in range(5)]
    mine = []
    for n in range(50):
        clock.now = n + 1
        mine.append(table.start("memfs_looping"))
    assert all(table.get(s.id) is s for s in others)
    assert [table.get(s.id) is not None for s in mine[-4:]] == [False, True, True, True]
    assert len(table) == 5 + 3


def test_web_max_sessions_per_token_is_at_least_one() -> None:
    with pytest.raises(pydantic.ValidationError):
        SessionLimits(web_max_sessions_per_token=0)
    table = SessionTable(SessionLimits(web_max_sessions_per_token=1), clock=Clock())
    first = table.start("memfs_t")
    second = table.start("memfs_t")
    assert table.get(first.id) is None and table.get(second.id) is second
