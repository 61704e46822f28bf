"""The sign-in throttle: failed sign-ins per client in a sliding window, and how long to wait.

Pure, with the clock passed in (``time.monotonic`` in the web app, a fake in
tests). A client (the web app's key for one: its address) that fails to sign
in ``signin_failures`` times within ``signin_window_seconds`` is refused
until the oldest of those failures is a window old; then one more try is
allowed, and so on. A failure counts while ``now - at < window``.

The caller asks :meth:`SigninThrottle.check` before looking at a token, and
a refused attempt is not looked at and not counted (so a client that keeps
knocking waits exactly the time it was told, no longer). It reports a bad
token with :meth:`~SigninThrottle.failed`. A good one changes nothing: the
failures age out of the window on their own, so a token of one's own buys no
guesses at anyone else's. One client's tries are looked at one at a time
(:mod:`memfs.web.signin_gate`): a burst sent at once meets the limit as tries
sent one by one do.

Memory is bounded: at most ``signin_failures`` times per client and at most
``signin_max_clients`` clients; past that the client whose last failure is
oldest is dropped first (clients whose failures have all expired go before
anyone is dropped). Dropping a client forgets its failures, so the bound is
a trade: a flood of more than ``signin_max_clients`` addresses buys a client
new tries, but can never make the process grow.

What counts as one client is :func:`throttle_key`: an IPv4 address, or an
IPv6 address's whole /64 (one host or link is handed a /64, so counting its
addresses apart would give it 2**64 tries); an IPv4 address mapped into IPv6
is that IPv4 address. The audit still names the address itself
(:func:`client_key`).
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict, deque
from collections.abc import Callable

from pydantic import Field

from memfs.core.models import Frozen

# The org of a failed sign-in's audit entry: the token named nobody the store knows.
NO_ORG = ""
# A client key (an address) longer than this is cut: it is a log field, not data.
MAX_CLIENT_KEY = 100

DEFAULT_SIGNIN_FAILURES = 5
DEFAULT_SIGNIN_WINDOW_SECONDS = 300.0
DEFAULT_SIGNIN_MAX_CLIENTS = 10_000


def client_key(host: str | None) -> str:
    """The throttle's and the audit's name for a client: its address, bounded; "unknown" if none."""
    if not host:
        return "unknown"
    return "".join(c for c in host if c.isprintable())[:MAX_CLIENT_KEY] or "unknown"


def throttle_key(host: str | None) -> str:
    """The throttle's name for a client: its IPv4 address or its IPv6 /64 (see the header)."""
    key = client_key(host)
    try:
        address = ipaddress.ip_address(key)
    except ValueError:
        return key  # not an address (or already a key): counted as it is
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


class SigninLimits(Frozen):
    """The throttle's named limits (settings of the web app), with their defaults."""

    signin_failures: int = Field(default=DEFAULT_SIGNIN_FAILURES, ge=1)
    signin_window_seconds: float = Field(default=DEFAULT_SIGNIN_WINDOW_SECONDS, gt=0)
    signin_max_clients: int = Field(default=DEFAULT_SIGNIN_MAX_CLIENTS, ge=1)


class Verdict(Frozen):
    """Whether a client may try to sign in now; if not, after how many whole seconds."""

    allowed: bool
    retry_after: int = 0


class ThrottleStatistics(Frozen):
    clients: int
    failures: int


class SigninThrottle:
    """Failed sign-ins per client key, in a sliding window (see the module header)."""

    def __init__(self, limits: SigninLimits | None = None, *, clock: Callable[[], float]) -> None:
        self.limits = limits or SigninLimits()
        self._clock = clock
        # key -> times of its failures still in the window, oldest first; the
        # dict itself is ordered by each key's latest failure, oldest first.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _expire(self, now: float) -> None:
        window = self.limits.signin_window_seconds
        while self._failures:
            key, times = next(iter(self._failures.items()))
            if now - times[-1] < window:
                break  # ordered by latest failure: every later key is newer still
            del self._failures[key]

    def _recent(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        window = self.limits.signin_window_seconds
        while times and now - times[0] >= window:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def check(self, key: str) -> Verdict:
        """Whether ``key`` may try now (nothing is recorded)."""
        now = self._clock()
        self._expire(now)
        times = self._recent(key, now)
        if times is None or len(times) < self.limits.signin_failures:
            return Verdict(allowed=True)
        wait = times[0] + self.limits.signin_window_seconds - now
        return Verdict(allowed=False, retry_after=max(1, math.ceil(wait)))

    def failed(self, key: str) -> Verdict:
        """Record a failed sign-in by ``key``; the answer is whether it may try again now."""
        now = self._clock()
        self._expire(now)
        times = self._recent(key, now)
        if times is None:
            times = deque(maxlen=self.limits.signin_failures)
            self._failures[key] = times
        times.append(now)
        self._failures.move_to_end(key)
        while len(self._failures) > self.limits.signin_max_clients:
            self._failures.popitem(last=False)
        return self.check(key)

    def statistics(self) -> ThrottleStatistics:
        return ThrottleStatistics(
            clients=len(self._failures),
            failures=sum(len(times) for times in self._failures.values()),
        )


__all__ = [
    "DEFAULT_SIGNIN_FAILURES",
    "DEFAULT_SIGNIN_MAX_CLIENTS",
    "DEFAULT_SIGNIN_WINDOW_SECONDS",
    "MAX_CLIENT_KEY",
    "NO_ORG",
    "SigninLimits",
    "SigninThrottle",
    "ThrottleStatistics",
    "Verdict",
    "client_key",
    "throttle_key",
]
