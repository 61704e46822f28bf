"""A store wrapper that fails, blocks or delays chosen methods: what a store outage looks like.

``FaultyStore(inner)`` wraps any store (managed, reviewing, lean, folder, an
app's own) and behaves exactly like it, until a test says otherwise::

    store = FaultyStore(MemoryStore(), fail={"load": StoreUnavailable("database is down")})
    store.heal("load")                               # load works again
    store.fail("store", StoreUnavailable("disk full"), times=1)   # the next store fails
    store.fail("store", InvalidName("too long", path="a.md"),
               when=lambda ref, changes, **kw: "a.md" in changes.paths)
    gate = store.block("store")                      # stores wait ...
    gate.set()                                       # ... until the test lets them go
    store.delay("load", 0.5)                         # every load takes half a second longer
    store.calls["store"]                             # how many times store was called
    store.inner                                      # the wrapped store, to seed or inspect

Every async method of the inner store can be made to fail (raise an
exception, or a fresh one from a zero-argument factory), block (wait for a
``trio.Event``) or be delayed (``trio.sleep``); a call counts in ``calls``
whether or not it is made to fail. On each call the order is: block, delay,
fail, then the inner method. ``fail`` with ``times=n`` fails the next ``n``
calls that ``when`` (if given) accepts, then heals itself; ``when`` gets the
call's own arguments. ``heal(name)`` (or ``heal()``, every method) clears the
faults and lets blocked calls go.

Everything else passes through: sync helpers (``files_nowait``, ...) and
attributes. The wrapper offers exactly the methods the inner store has, so it
passes the same ``isinstance`` checks (``ManagedStore``, ``ReviewingStore``,
``LeanStore``) and no more: wrapping a folder store still makes a store
without history. Naming a method the inner store does not have is an
``AttributeError``, so a typo never makes a fault that cannot happen.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

Fault = BaseException | Callable[[], BaseException]


@dataclass
class _Failure:
    error: Fault
    times: int | None
    when: Callable[..., bool] | None


def _make_error(fault: Fault) -> BaseException:
    return fault if isinstance(fault, BaseException) else fault()


class FaultyStore:
    """Wraps ``inner``; chosen async methods fail, block or wait first (see the module header)."""

    inner: Any
    calls: Counter[str]

    def __new__(
        cls,
        inner: object,
        *,
        fail: Mapping[str, Fault] | None = None,
        delay: Mapping[str, float] | None = None,
        block: Iterable[str] = (),
    ) -> FaultyStore:
        # A class per inner type, holding the inner store's methods as its own, so
        # runtime protocol checks (which look at the class, not __getattr__) see
        # exactly the inner store's capabilities.
        names = [
            name
            for name in dir(type(inner))
            if not name.startswith("_") and callable(getattr(type(inner), name, None))
        ]
        members: dict[str, object] = {}
        for name in names:
            if inspect.iscoroutinefunction(getattr(type(inner), name)):
                members[name] = _faulting(name)
            else:
                members[name] = _passing(name)
        made = type(f"Faulty{type(inner).__name__}", (cls,), members)
        return super().__new__(made)

    def __init__(
        self,
        inner: object,
        *,
        fail: Mapping[str, Fault] | None = None,
        delay: Mapping[str, float] | None = None,
        block: Iterable[str] = (),
    ) -> None:
        self.inner = inner
        self.calls = Counter()
        self._failures: dict[str, _Failure] = {}
        self._delays: dict[str, float] = {}
        self._gates: dict[str, trio.Event] = {}
        for name, error in (fail or {}).items():
            self.fail(name, error)
        for name, seconds in (delay or {}).items():
            self.delay(name, seconds)
        for name in block:
            self.block(name)

    def _faultable(self, name: str) -> str:
        if not inspect.iscoroutinefunction(getattr(type(self.inner), name, None)):
            raise AttributeError(f"{self.inner!r} has no async method {name!r} to make faulty")
        return name

    def fail(
        self,
        name: str,
        error: Fault,
        *,
        times: int | None = None,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make ``name`` raise ``error`` (or what the factory makes) until healed, or ``times``."""
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (heal the method to stop failing)")
        self._failures[self._faultable(name)] = _Failure(error, times, when)

    def delay(self, name: str, seconds: float) -> None:
        """Make every call of ``name`` wait ``seconds`` first."""
        if seconds < 0:
            raise ValueError("a delay cannot be negative")
        self._delays[self._faultable(name)] = seconds

    def block(self, name: str) -> trio.Event:
        """Make calls of ``name`` wait until the returned event is set (or ``heal``)."""
        gate = self._gates.get(self._faultable(name))
        if gate is None or gate.is_set():
            gate = self._gates[name] = trio.Event()
        return gate

    def heal(self, name: str | None = None) -> None:
        """Clear the faults of ``name`` (of every method if None) and let blocked calls go."""
        names = list({*self._failures, *self._delays, *self._gates}) if name is None else [name]
        for each in names:
            self._failures.pop(each, None)
            self._delays.pop(each, None)
            gate = self._gates.pop(each, None)
            if gate is not None:
                gate.set()

    async def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls[name] += 1
        gate = self._gates.get(name)
        if gate is not None:
            await gate.wait()
        seconds = self._delays.get(name)
        if seconds is not None:
            await trio.sleep(seconds)
        failure = self._failures.get(name)
        if failure is not None and (failure.when is None or failure.when(*args, **kwargs)):
            if failure.times is not None:
                failure.times -= 1
                if failure.times == 0:
                    del self._failures[name]
            raise _make_error(failure.error)
        return await getattr(self.inner, name)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only what the class does not have: the inner store's attributes.
        if name.startswith("__") or name in ("inner", "calls"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"FaultyStore({self.inner!r})"


def _faulting(name: str) -> Callable[..., Any]:
    async def method(self: FaultyStore, *args: Any, **kwargs: Any) -> Any:
        return await self._call(name, args, kwargs)

    method.__name__ = name
    return method


def _passing(name: str) -> Callable[..., Any]:
    def method(self: FaultyStore, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


__all__ = ["Fault", "FaultyStore"]
