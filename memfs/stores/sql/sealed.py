"""A person's memory sealed in a managed store (the format is ``memfs.core.sealing``).

Every revision of a user-layer space is written with ``sealed = 1``: its
content, prompt and labels are AES-GCM ciphertexts under the person's key,
bound to (org, user, space, path, revision id) and the column. A revision of
an org or shared space that someone's words wrote (``Provenance.author``) is
written with ``sealed = 2``: its content stays in the clear (the org's), its
prompt and ``by`` label are sealed under the author's key, named in
``author``; forgetting the author leaves them None. The person's
key is kept only wrapped by the store key, in ``person_keys``; forgetting the
person deletes that row with theirs. Org and shared spaces are not sealed:
forgetting never reaches them.

The store key rides on the transaction's ``Db``, so the row helpers reach
it without another argument. Person keys are not cached across
transactions: another process may forget the person at any moment, and a key
kept here would then seal new rows nobody could open again.
"""

from __future__ import annotations

from dataclasses import dataclass

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.stores.sql.db import Db
from memfs.stores.sql.spaces import _space_row

# revisions.sealed: what of a revision is sealed (see the module's header).
SEALED_CONTENT = 1  # a person's revision: content, prompt and labels, under their key
SEALED_WORDS = 2  # an org revision: its author's prompt and by label, under theirs


@dataclass(frozen=True)
class Sealer:
    """Seals and opens the values of one person's space."""

    key: bytes
    org: str
    user: str
    space: str

    def _aad(self, kind: str, path: str, revision_id: int) -> bytes:
        return sealing.bound(kind, self.org, self.user, self.space, path, str(revision_id))

    def content(self, path: str, revision_id: int, content: bytes) -> bytes:
        return sealing.seal(self.key, content, self._aad("content", path, revision_id))

    def open_content(self, path: str, revision_id: int, sealed: bytes) -> bytes:
        return sealing.unseal(self.key, sealed, self._aad("content", path, revision_id))

    def text(self, kind: str, path: str, revision_id: int, text: str | None) -> bytes | None:
        return sealing.seal_text(self.key, text, self._aad(kind, path, revision_id))

    def open_text(self, kind: str, path: str, revision_id: int, sealed: bytes | None) -> str | None:
        if sealed is None:
            return None
        return sealing.unseal_text(self.key, bytes(sealed), self._aad(kind, path, revision_id))

    def name(self, path: str) -> str:
        """What the rows keep for ``path`` of this space (``sealing.name_of``)."""
        return sealing.name_of(self.key, self.org, self.user, self.space, path)

    def fingerprint(self, fingerprint: str) -> str:
        """A change set's fingerprint, keyed like a name (no path holds a NUL, so none collides)."""
        return self.name(f"\0turn changes\0{fingerprint}")

    def _path_aad(self, name: str) -> bytes:
        return sealing.bound("path", self.org, self.user, self.space, name)

    def seal_path(self, name: str, path: str) -> bytes:
        return sealing.seal(self.key, path.encode(), self._path_aad(name))

    def open_path(self, name: str, sealed: bytes) -> str:
        return sealing.unseal(self.key, bytes(sealed), self._path_aad(name)).decode()

    def seal_json(self, kind: str, parts: tuple[str, ...], value: str) -> bytes:
        """A JSON record of this space (``kind`` at ``parts``), sealed."""
        return sealing.seal(self.key, value.encode(), self._record_aad(kind, parts))

    def open_json(self, kind: str, parts: tuple[str, ...], sealed: bytes) -> str:
        return sealing.unseal(self.key, bytes(sealed), self._record_aad(kind, parts)).decode()

    def _record_aad(self, kind: str, parts: tuple[str, ...]) -> bytes:
        return sealing.bound(kind, self.org, self.user, self.space, *parts)


class Names:
    """The paths of one space as its rows keep them.

    In an org or shared space a row keeps the path itself. In a person's
    space it keeps the path's name (``Sealer.name``), and ``names`` keeps
    each name's path sealed, once per (space, name); :meth:`path` opens it.
    Every statement that writes or looks up a path of a space goes through
    :meth:`kept`, and every path read back from a row through :meth:`path`,
    so which of the two a space uses is decided here alone. Rows keyed by
    name do not sort by path: whoever needs path order sorts what it read.
    """

    def __init__(self, db: Db, space_id: int, sealer: Sealer | None) -> None:
        self._db = db
        self._space_id = space_id
        self._sealer = sealer
        self._opened: dict[str, str] | None = None
        self._written: set[str] = set()

    @property
    def sealed(self) -> bool:
        return self._sealer is not None

    @property
    def sealer(self) -> Sealer | None:
        return self._sealer

    def kept(self, path: str, *, write: bool = False) -> str:
        """What the rows keep for ``path``; with ``write``, its name is kept first if new."""
        if self._sealer is None:
            return path
        name = self._sealer.name(path)
        if write and name not in self._written:
            self._db.execute(
                "INSERT INTO names (space_id, name, sealed) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (self._space_id, name, self._sealer.seal_path(name, path)),
            )
            self._written.add(name)
            if self._opened is not None:
                self._opened[name] = path
        return name

    def path(self, kept: str) -> str:
        """The path a row's ``kept`` value stands for."""
        if self._sealer is None:
            return kept
        if self._opened is None:
            sealer = self._sealer
            self._opened = {
                name: sealer.open_path(name, sealed)
                for name, sealed in self._db.tuples(
                    "SELECT name, sealed FROM names WHERE space_id = ?", (self._space_id,)
                )
            }
        try:
            return self._opened[kept]
        except KeyError:
            raise sealing.SealBroken(
                "a row of a person's space names a path the space keeps no name for"
            ) from None


def _names(db: Db, space_id: int, *, create: bool) -> Names:
    """How the space's rows keep paths; ``create`` makes the person's key if it has none yet."""
    memo = ("names", space_id)
    if memo in db.memo:
        return db.memo[memo]  # type: ignore[no-any-return]
    sealer = _sealer(db, space_id, create=create)
    names = Names(db, space_id, sealer)
    if ("sealer", space_id) in db.memo:  # settled: an org space, or a person's with a key
        db.memo[memo] = names
    return names


def _person_key(db: Db, org: str, user: str, *, create: bool) -> bytes | None:
    store_key = _store_key(db)
    row = db.execute(
        'SELECT wrapped FROM person_keys WHERE org = ? AND "user" = ?', (org, user)
    ).fetchone()
    if row is not None:
        try:
            return sealing.unwrap_person_key(store_key, org, user, bytes(row[0]))
        except sealing.SealBroken:
            _require_current_key(db)  # rotated since this process opened: say so
            raise
    if not create:
        return None
    # A key wrapped under a store key that was rotated away would open for nobody.
    _require_current_key(db)
    key = sealing.new_key()
    db.execute(
        'INSERT INTO person_keys (org, "user", wrapped) VALUES (?, ?, ?)',
        (org, user, sealing.wrap_person_key(store_key, org, user, key)),
    )
    return key


def _sealer(db: Db, space_id: int, *, create: bool) -> Sealer | None:
    """The sealer of a person's space; None for an org or shared space (or no key yet)."""
    memo = ("sealer", space_id)
    if memo in db.memo:
        return db.memo[memo]  # type: ignore[no-any-return]
    row = _space_row(db, space_id)
    if row is None:
        return None
    if row[0] != "user":
        db.memo[memo] = None
        return None
    key = _person_key(db, row[1], row[2], create=create)
    if key is None:
        return None  # no key yet: the next ask may make one
    db.memo[memo] = sealer = Sealer(key, row[1], row[2], row[3])
    return sealer


def _author_sealer(db: Db, space_id: int, author: str, *, create: bool) -> Sealer | None:
    """The sealer of ``author``'s words in an org or shared space (their person key)."""
    memo = (f"author:{author}", space_id)
    if memo in db.memo:
        return db.memo[memo]  # type: ignore[no-any-return]
    row = _space_row(db, space_id)
    if row is None:
        return None
    key = _person_key(db, row[1], author, create=create)
    if key is None:
        return None  # no key yet: the next ask may make one
    db.memo[memo] = sealer = Sealer(key, row[1], author, row[3])
    return sealer


def _opened(
    sealer: Sealer | None, path: str, revision_id: int, content: bytes, sealed: int
) -> bytes:
    raw = bytes(content)  # a memoryview, where the driver hands one out
    if sealed != SEALED_CONTENT:  # 0: in the clear; 2: only the author's words are sealed
        return raw
    if sealer is None:
        raise sealing.SealBroken("a sealed revision has no person key to open it")
    return sealer.open_content(path, revision_id, raw)


def _require_current_key(db: Db) -> None:
    """Refuse to go on under a store key the database no longer has (``memfs db rotate-key``)."""
    value = db.scalar("SELECT value FROM store_key_check WHERE id = 1")
    if value is not None and not sealing.same_key_check(str(value), _store_key(db)):
        raise ConfigError(
            "the store key was rotated since this process opened the store; restart it "
            "with the new store_key_file",
            path="store_key_file",
        )


def _rotate_store_key(db: Db, new_key: bytes) -> int:
    """Wrap every person's key under ``new_key`` and note it as the store's; how many keys.

    Run in one write transaction: afterwards only ``new_key`` opens the
    store, and a copy of the database from before (a backup) opens only
    with the old key, so destroying the old key file ends every such copy.
    """
    old = _store_key(db)
    rows = db.tuples('SELECT org, "user", wrapped FROM person_keys')
    for org, user, wrapped in rows:
        key = sealing.unwrap_person_key(old, org, user, bytes(wrapped))
        db.execute(
            'UPDATE person_keys SET wrapped = ? WHERE org = ? AND "user" = ?',
            (sealing.wrap_person_key(new_key, org, user, key), org, user),
        )
    db.execute("UPDATE store_key_check SET value = ? WHERE id = 1", (sealing.key_check(new_key),))
    db.store_key = new_key
    db.memo.clear()
    return len(rows)


def _forget_person_key(db: Db, org: str, user: str) -> None:
    db.execute('DELETE FROM person_keys WHERE org = ? AND "user" = ?', (org, user))
    db.memo.clear()  # nothing sealed under that key may be written or read after


def _store_key(db: Db) -> bytes:
    if not db.store_key:
        raise sealing.SealBroken("this store was opened without the store key")
    return db.store_key
