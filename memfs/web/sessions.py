"""The Memory tab's browser sessions: which browser signed in with which token, and its CSRF secret.

A browser signs in at ``/login`` with a token the store resolves; it then
holds only a session id, in a cookie (HttpOnly, SameSite=Strict, Secure
under TLS). The table keeps the token itself, so every request resolves it
through the store again: a revoked token or a removed member ends the
browser's session at its next request, and a role changed since applies at
once. Nothing of the session is written anywhere: a restart signs everyone
out, which is the safe way to fail.

Each session has its own CSRF secret, put in every form the pages render
and compared (in constant time) on every form post. The sign-in form itself
has no session yet; it is protected by a double-submit secret (a cookie of
its own and the same value in the form), so another site cannot sign a
browser in as someone else.

Pure, with the clock passed in. Bounds (:class:`SessionLimits`, settings of
the web app): a session ends ``web_session_idle_seconds`` after its last
request and ``web_session_max_seconds`` after sign-in, whichever is first;
at most ``web_max_sessions`` are held, and past that the one idle longest
ends first. One token holds at most ``web_max_sessions_per_token`` sessions:
signing in with it once more ends its own oldest session, so nobody can push
everyone else out of the table by signing in again and again.
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field

from memfs.core.models import Frozen

SESSION_COOKIE = "memfs_session"
LOGIN_COOKIE = "memfs_login"
SECRET_BYTES = 32

DEFAULT_WEB_SESSION_IDLE_SECONDS = 8 * 3600.0
DEFAULT_WEB_SESSION_MAX_SECONDS = 24 * 3600.0
DEFAULT_WEB_MAX_SESSIONS = 10_000
DEFAULT_WEB_MAX_SESSIONS_PER_TOKEN = 20


class SessionLimits(Frozen):
    web_session_idle_seconds: float = Field(default=DEFAULT_WEB_SESSION_IDLE_SECONDS, gt=0)
    web_session_max_seconds: float = Field(default=DEFAULT_WEB_SESSION_MAX_SECONDS, gt=0)
    web_max_sessions: int = Field(default=DEFAULT_WEB_MAX_SESSIONS, ge=1)
    web_max_sessions_per_token: int = Field(default=DEFAULT_WEB_MAX_SESSIONS_PER_TOKEN, ge=1)


@dataclass
class BrowserSession:
    id: str
    token: str
    csrf: str
    started: float
    seen: float

    def __repr__(self) -> str:
        # Never a secret, wherever a session is printed.
        return f"BrowserSession(started={self.started}, seen={self.seen})"


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def same_secret(kept: str, presented: object) -> bool:
    """Whether ``presented`` is ``kept``, compared in constant time; False for a non-string."""
    if not isinstance(presented, str) or not presented:
        return False
    return hmac.compare_digest(kept.encode("utf-8"), presented.encode("utf-8"))


class SessionTable:
    """The signed-in browsers of one web app (see the module header)."""

    def __init__(self, limits: SessionLimits | None = None, *, clock: Callable[[], float]) -> None:
        self.limits = limits or SessionLimits()
        self._clock = clock
        # id -> session, ordered by last request, least recent first.
        self._sessions: OrderedDict[str, BrowserSession] = OrderedDict()
        # token -> the ids of its sessions, oldest sign-in first.
        self._by_token: dict[str, OrderedDict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def start(self, token: str) -> BrowserSession:
        """A new session holding ``token``; the session idle longest ends if the table is full."""
        now = self._clock()
        self._expire(now)
        session = BrowserSession(
            id=new_secret(), token=token, csrf=new_secret(), started=now, seen=now
        )
        self._sessions[session.id] = session
        own = self._by_token.setdefault(token, OrderedDict())
        own[session.id] = None
        while len(own) > self.limits.web_max_sessions_per_token:
            self._drop(next(iter(own)))
        while len(self._sessions) > self.limits.web_max_sessions:
            self._drop(next(iter(self._sessions)))
        return session

    def get(self, id: str | None) -> BrowserSession | None:
        """The live session of cookie value ``id`` (its last request now), or None."""
        if not id:
            return None
        now = self._clock()
        self._expire(now)
        session = self._sessions.get(id)
        if session is None:
            return None
        if self._over(session, now):
            self._drop(id)
            return None
        session.seen = now
        self._sessions.move_to_end(id)
        return session

    def end(self, id: str | None) -> None:
        if id and id in self._sessions:
            self._drop(id)

    def _drop(self, id: str) -> None:
        session = self._sessions.pop(id)
        own = self._by_token[session.token]
        del own[id]
        if not own:
            del self._by_token[session.token]

    def _over(self, session: BrowserSession, now: float) -> bool:
        return (
            now - session.seen >= self.limits.web_session_idle_seconds
            or now - session.started >= self.limits.web_session_max_seconds
        )

    def _expire(self, now: float) -> None:
        # Least recently seen first: stop at the first one still inside its idle time.
        while self._sessions:
            session = next(iter(self._sessions.values()))
            if now - session.seen < self.limits.web_session_idle_seconds:
                break
            self._drop(session.id)


__all__ = [
    "DEFAULT_WEB_MAX_SESSIONS",
    "DEFAULT_WEB_MAX_SESSIONS_PER_TOKEN",
    "DEFAULT_WEB_SESSION_IDLE_SECONDS",
    "DEFAULT_WEB_SESSION_MAX_SECONDS",
    "LOGIN_COOKIE",
    "SESSION_COOKIE",
    "BrowserSession",
    "SessionLimits",
    "SessionTable",
    "new_secret",
    "same_secret",
]
