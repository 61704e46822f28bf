"""HTTP/1.1 over a Unix socket, for ``memfs.Client``: a small pool of keep-alive connections.

The standard library's ``http.client`` speaks the protocol; this module only
connects it to a socket file, keeps idle connections for the next request
(any thread may take one; each request has one to itself), and tells apart
the two ways a request can fail:

- :class:`Unreachable`: nothing was sent (no such socket, nobody listening,
  no permission); the caller may say the daemon is not running;
- anything else escaping :meth:`UnixHTTP.request` (``OSError``,
  ``http.client.HTTPException``): the request may have reached the daemon.

A request is never sent twice. An idle connection the server has closed
(its keep-alive timeout) is found before it is used, by a zero-timeout poll,
and replaced; the connection is only trusted once that poll finds it quiet.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
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


# Idle connections kept for the next request: enough for a harness's threads
# to reuse theirs, few enough that a burst of them does not keep the
# daemon's connection tasks alive long after (hypercorn closes idle ones itself).
KEEP_IDLE = 20


class UnixHTTP:
    """Requests to the HTTP server on the Unix socket ``path``; safe to share between threads.

    At most ``keep`` idle connections are kept; one more is closed once its answer is read.
    """

    def __init__(self, path: Path, *, timeout: float | None, keep: int = KEEP_IDLE) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._keep = keep
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
            if conn.quiet():
                return conn
            conn.close()

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        conn.close()


__all__ = ["KEEP_IDLE", "Answer", "UnixHTTP", "Unreachable"]
