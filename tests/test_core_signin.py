"""The sign-in throttle: failures per client in a sliding window, at and past its limits."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memfs.core.signin import (
    DEFAULT_SIGNIN_FAILURES,
    DEFAULT_SIGNIN_WINDOW_SECONDS,
    MAX_CLIENT_KEY,
    SigninLimits,
    SigninThrottle,
    ThrottleStatistics,
    Verdict,
    client_key,
    throttle_key,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(
    failures: int = 3, window: float = 60.0, clients: int = 100
) -> tuple[SigninThrottle, Clock]:
    clock = Clock()
    limits = SigninLimits(
        signin_failures=failures, signin_window_seconds=window, signin_max_clients=clients
    )
    return SigninThrottle(limits, clock=clock), clock


def test_the_defaults_are_five_failures_in_five_minutes() -> None:
    limits = SigninLimits()
    assert (limits.signin_failures, limits.signin_window_seconds) == (5, 300.0)
    assert (DEFAULT_SIGNIN_FAILURES, DEFAULT_SIGNIN_WINDOW_SECONDS) == (5, 300.0)
    gate = SigninThrottle(clock=Clock())
    for _ in range(4):
        assert gate.failed("10.0.0.1").allowed
    assert gate.failed("10.0.0.1") == Verdict(allowed=False, retry_after=300)


def test_a_client_below_the_limit_may_try_and_at_the_limit_is_refused() -> None:
    gate, clock = throttle()
    assert gate.check("a") == Verdict(allowed=True)
    assert gate.failed("a").allowed
    clock.now += 1
    assert gate.failed("a").allowed  # two of three
    clock.now += 1
    refused = gate.failed("a")  # the third, at the limit
    assert refused == Verdict(allowed=False, retry_after=58)
    assert gate.check("a") == refused


def test_retry_after_counts_down_and_the_oldest_failure_ageing_out_allows_one_more() -> None:
    gate, clock = throttle()
    for _ in range(3):
        gate.failed("a")
        clock.now += 10  # failures at 1000, 1010, 1020
    clock.now = 1059.5
    assert gate.check("a") == Verdict(allowed=False, retry_after=1)  # rounded up, never 0
    clock.now = 1060.0  # the first failure is exactly one window old: it no longer counts
    assert gate.check("a") == Verdict(allowed=True)
    refused = gate.failed("a")  # past the limit again: now waits for the one at 1010
    assert refused == Verdict(allowed=False, retry_after=10)


def test_a_refused_attempt_is_not_counted_so_the_wait_is_what_was_told() -> None:
    gate, clock = throttle()
    for _ in range(3):
        gate.failed("a")
    told = gate.check("a").retry_after
    for _ in range(50):
        assert not gate.check("a").allowed
        clock.now += 1
    clock.now = 1000.0 + told
    assert gate.check("a").allowed


def test_clients_are_counted_apart() -> None:
    gate, _ = throttle()
    for _ in range(3):
        gate.failed("a")
    assert not gate.check("a").allowed
    assert gate.check("b").allowed
    assert gate.statistics() == ThrottleStatistics(clients=1, failures=3)


def test_memory_is_bounded_by_failures_per_client_and_by_clients() -> None:
    gate, clock = throttle(failures=3, clients=10)
    for _ in range(100):
        gate.failed("a")
    assert gate.statistics().failures == 3  # only the last `signin_failures` times are kept
    assert not gate.check("a").allowed
    for n in range(50):
        clock.now += 0.01
        gate.failed(f"client-{n}")
    stats = gate.statistics()
    assert stats.clients == 10  # at the bound
    # the clients whose last failure is oldest went first: "a", and its refusal with it
    assert gate.check("a") == Verdict(allowed=True)
    gate.failed("client-49")
    gate.failed("client-49")
    assert not gate.check("client-49").allowed  # the newest are kept, failures and all


def test_expired_clients_are_dropped() -> None:
    gate, clock = throttle(window=60.0)
    for n in range(20):
        gate.failed(f"c{n}")
    clock.now += 60
    gate.check("someone")
    assert gate.statistics().clients == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"signin_failures": 0},
        {"signin_window_seconds": 0},
        {"signin_window_seconds": -1},
        {"signin_max_clients": 0},
        {"signin_failures": 3, "unknown": 1},
    ],
)
def test_limits_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        SigninLimits.model_validate(bad)


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.10", "192.0.2.10"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::FFFF", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.10", "192.0.2.10"),
        ("::1", "::/64"),
        ("unix-socket", "unix-socket"),
        (None, "unknown"),
    ],
)
def test_the_throttle_counts_an_ipv6_clients_whole_slash_64_as_one_client(
    host: str | None, key: str
) -> None:
    # One host is given a whole /64; counting each address apart would give it 2**64 tries.
    assert throttle_key(host) == key
    assert throttle_key(key) == key  # a key is its own key


def test_the_audit_keeps_the_clients_own_address() -> None:
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::1"


def test_a_client_key_is_the_address_whole_at_max_client_key_and_cut_to_it_past() -> None:
    # A log field, not data: a longer name is cut, once what cannot be shown is taken out.
    at = "h" * MAX_CLIENT_KEY
    assert client_key(at) == at
    assert client_key(at + "x") == at
    assert client_key("\x1b[2J" + at + "x") == "[2J" + at[: MAX_CLIENT_KEY - 3]
    assert throttle_key(at + "x") == throttle_key(at + "y") == at  # counted as one client
