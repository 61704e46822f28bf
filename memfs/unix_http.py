"""HTTP/1.1 over a Unix socket, for ``memfs.Client``: a small pool of keep-alive connections.

The standard library's ``http.client`` speaks the protocol; this module only
connects it to a socket file, keeps idle connections for the next request
(any thread may take one; each request has one to itself), and tells apart
the two ways a request can fail:

- :class:`Unreachable`: nothing was sent (no such socket, nobody listening,
  no permission); the caller may say the daemon is not running;
- anything else escaping :meth:`UnixHTTP.request` (``OSError``,
  ``http.client.HTTPException``): the request may have reached the daemon.

A request is never sent twice, so a request must never cross the server's
close of an idle connection: the server would drop it unread, and the client
could not tell that from a daemon that died mid-request. Two rules keep them
apart. A connection idle for ``reuse_idle`` seconds or more is closed, not
reused: the daemon's control server keeps idle connections for
``SERVER_KEEP_ALIVE_SECONDS`` (its hypercorn ``keep_alive_timeout``), and the
client's ``REUSE_IDLE_SECONDS`` is well below it, so a client that waited on
a model between two turns opens a fresh connection rather than racing the
close. And an idle connection the server has closed anyway is found before
it is used, by a zero-timeout poll, and replaced; the connection is only
trusted once that poll finds it quiet.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path


class Unreachable(OSError):
    """The socket could not be connected to: the request was not sent. ``cause`` says why."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole response: its status and body."""

    status: int
    content: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _Connection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        # The host is never resolved: it only fills the Host header.
        super().__init__("memfs", timeout=timeout)
        self._socket_path = path
        self.idle_since = 0.0  # monotonic; set when it is given back

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._socket_path)
        except OSError as exc:
            sock.close()
            raise Unreachable(exc) from exc
        self.sock = sock

    def quiet(self) -> bool:
        """Whether an idle connection is still open with nothing unread (safe to reuse)."""
        if self.sock is None:
            return False
        # poll, not select: a process may hold descriptors past select's 1024.
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return not poller.poll(0)  # readable while idle: closed by the server, or stray bytes


# How long the daemon's control server keeps an idle connection open.
SERVER_KEEP_ALIVE_SECONDS = 5.0
# How long the client reuses an idle connection: well below the server's, so
# the server's close of an idle connection never crosses a request in flight.
REUSE_IDLE_SECONDS = SERVER_KEEP_ALIVE_SECONDS / 2

# Idle connections kept for the next request: enough for a harness's threads
# to reuse theirs, few enough that a burst of them does not keep the
# daemon's connection tasks alive long after (hypercorn closes idle ones itself).
KEEP_IDLE = 20


class UnixHTTP:
    """Requests to the HTTP server on the Unix socket ``path``; safe to share between threads.

    At most ``keep`` idle connections are kept; one more is closed once its answer is read.
    One idle for ``reuse_idle`` seconds or more is closed instead of being reused.
    """

    def __init__(
        self,
        path: Path,
        *,
        timeout: float | None,
        keep: int = KEEP_IDLE,
        reuse_idle: float = REUSE_IDLE_SECONDS,
    ) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._keep = keep
        self._reuse_idle = reuse_idle
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        conn = self._take()
        try:
            # The server may answer before it has read the whole body (a 413
            # for one past its limit) and close: its answer is still there to
            # read, and says more than the broken pipe.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.request(method, url, body=body, headers=headers or {})
            response = conn.getresponse()
            answer = Answer(response.status, response.read())
        except BaseException:
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return answer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> _Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return _Connection(self.path, self.timeout)  # connects at its first request
            if time.monotonic() - conn.idle_since < self._reuse_idle and conn.quiet():
                return conn
            conn.close()

    def _give_back(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        conn.close()


__all__ = [
    "KEEP_IDLE",
    "REUSE_IDLE_SECONDS",
    "SERVER_KEEP_ALIVE_SECONDS",
    "Answer",
    "UnixHTTP",
    "Unreachable",
]
