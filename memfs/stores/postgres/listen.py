"""Notices of changed spaces from the database: a hint to catch up, never what correctness rests on.

A trigger on ``spaces`` (``schema.py``) sends a notice on the ``memfs_spaces``
channel when a space's version moves or the space is deleted (a person
forgotten). The payload is a JSON object::

    {"schema": "<the spaces table's schema>", "id": <space id>,
     "layer": "org" | "user", "org": "...", "user": "..." ('' outside the
     user layer), "space": "..."}

Channels are per database, not per schema, so a listener keeps only the
notices of its own store's schema. A process listens over one connection of
its own (:class:`SpaceListener`, outside the store's pool; LISTEN holds a
session). Notices are lost while that connection is down, and PostgreSQL
sends none for a transaction that rolled back, so whoever listens treats a
notice only as a reason to look now: what a turn loads is always decided by
the space's version, read in the load's own transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

import psycopg

from memfs.core.errors import StoreUnavailable
from memfs.core.models import SpaceRef

CHANNEL = "memfs_spaces"
# What pg_stat_activity calls a listener's connection, followed by ":<pid>" of
# the process that listens (an operator, or a test, can find one daemon's).
APPLICATION_NAME = "memfs-listen"


@dataclass(frozen=True)
class SpaceNotice:
    """One space another process changed (or deleted): its id in this database and its name."""

    id: int
    ref: SpaceRef


def parse_notice(payload: str, schema: str) -> SpaceNotice | None:
    """The notice in ``payload``, or None if it is another schema's or not one memfs sent."""
    try:
        fields = json.loads(payload)
        if fields["schema"] != schema:
            return None
        user = fields["user"] or None
        ref = SpaceRef(layer=fields["layer"], org=fields["org"], user=user, space=fields["space"])
        return SpaceNotice(id=int(fields["id"]), ref=ref)
    except (ValueError, TypeError, KeyError):
        return None


class SpaceListener:
    """One dedicated connection LISTENing on ``memfs_spaces``; blocking, used from one thread.

    ``open`` connects and listens (``StoreUnavailable`` if it cannot);
    ``wait`` returns the notices that came within ``timeout`` seconds
    (``StoreUnavailable`` once the connection is lost: open again, then catch
    up, since what was sent meanwhile is gone); ``close`` is safe at any time.
    """

    def __init__(self, url: str, *, where: str, connect_timeout_seconds: float) -> None:
        self._url = url
        self._where = where
        self._connect_timeout = max(1, round(connect_timeout_seconds))
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._schema = ""

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def open(self) -> None:
        self.close()
        try:
            conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name=f"{APPLICATION_NAME}:{os.getpid()}",
                # Over TCP, a server that went away without a word (a dead host)
                # fails the connection within about this long, not never.
                keepalives=1,
                keepalives_idle=self._connect_timeout,
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=self._connect_timeout * 1000,
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot listen for changes: {exc}", path=self._where) from exc
        try:
            row = conn.execute(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.oid = to_regclass('spaces')"
            ).fetchone()
            # Before the store's first migration there is no table yet: its
            # schema is the first of the search path, where the store makes it.
            if row is None:
                row = conn.execute("SELECT current_schema()").fetchone()
            self._schema = str(row[0]) if row is not None else "public"
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot listen for changes: {exc}", path=self._where) from exc
        self._conn = conn

    def wait(self, timeout: float) -> list[SpaceNotice]:
        conn = self._conn
        if conn is None or conn.closed:
            raise StoreUnavailable("not listening for changes", path=self._where)
        notices: list[SpaceNotice] = []
        try:
            # The first notice ends the wait; the rest that came with it are taken below.
            notices.extend(self._parsed(conn.notifies(timeout=timeout, stop_after=1)))
            # A connection lost without a word (a dead host) reads as no notices: ask it.
            conn.execute("SELECT 1")
            notices.extend(self._parsed(conn.notifies(timeout=0)))
        except psycopg.Error as exc:
            self.close()
            why = f"stopped listening for changes: {exc}"
            raise StoreUnavailable(why, path=self._where) from exc
        return notices

    def _parsed(self, notes: Iterable[psycopg.Notify]) -> list[SpaceNotice]:
        found = (parse_notice(note.payload, self._schema) for note in notes)
        return [notice for notice in found if notice is not None]

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()


__all__ = ["APPLICATION_NAME", "CHANNEL", "SpaceListener", "SpaceNotice", "parse_notice"]
