"""How a person's memory is sealed: keys, the sealed format, and what binds a ciphertext to its row.

This module owns the format; the stores only call it. Three kinds of key::

    store key    32 random bytes in the file ``store_key_file`` names, never in the
                 database (a backup holding both could decrypt). The file holds the
                 key as 64 hex digits and a newline (:func:`parse_store_key`).
    key check    HMAC-SHA256(store key, ``CHECK_LABEL``) as hex, kept in the database
                 so a store opened with another key is refused at open
                 (:func:`key_check`), never by reads that fail one by one.
    person key   32 random bytes per (org, user), kept in the database only wrapped:
                 sealed under the store key with associated data
                 ``("person-key", org, user)``. Forgetting the person deletes the
                 wrapped key with their rows, so a copy of their rows left behind is
                 ciphertext, and so is the wrapped key left beside it: only the store
                 key opens that, until the store key is rotated and the old one
                 destroyed (a store that keeps dead rows, as PostgreSQL does, keeps
                 such copies; docs/daemon.md, "A person's memory is sealed").

A sealed value is ``VERSION (1 byte) || nonce (12 bytes) || AES-256-GCM ciphertext
and tag``. Every seal draws a fresh random 96-bit nonce: a key seals at most a
few million values in a store's life, far below the 2**32 random nonces past
which AES-GCM's nonce collisions become a concern, and random nonces need no
counter shared between processes or hosts.

A person's file names are sealed too: rows keep a path of a person's space
under its name (:func:`name_of`, a keyed digest), and the path itself sealed
once per space and name, so no table holds a person's file name in readable
form, and a backup of any of them holds none once the key is gone.

Associated data (:func:`bound`) names where a ciphertext belongs: the kind of
value (``content``, ``prompt``, ``label``), org, user, space, path and the
revision id, each length-prefixed so no two tuples encode alike. A ciphertext
moved to another row, person, path or column fails to open (``SealBroken``)
rather than reading as someone else's memory.

One key per person, not per file: forgetting one file deletes its rows, which
the stores overwrite (SQLite's ``secure_delete``); a per-file key wrapped by
the person's key would not reach further, since a copy of the wrapped file key
opens with the person's key for as long as the person is remembered.

The AES-GCM calls are made here, not in an adapter: they are pure
computations over bytes (``cryptography`` does no I/O), and keeping the cipher
next to the nonce layout and the associated data leaves the stores nothing to
get wrong. Randomness comes from ``secrets``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memfs.core.errors import ConfigError, MemfsError

KEY_BYTES = 32
NONCE_BYTES = 12
VERSION = b"\x01"
CHECK_LABEL = b"memfs store key check v1"
_AAD_PREFIX = b"memfs-seal-v1"


class SealBroken(MemfsError):
    """A sealed value did not open: the wrong key, or a ciphertext moved or changed."""

    http_status = 500
    exit_code = 70  # EX_SOFTWARE


def new_key() -> bytes:
    """A fresh random 256-bit key."""
    return secrets.token_bytes(KEY_BYTES)


def bound(kind: str, *parts: str) -> bytes:
    """The associated data for a value of ``kind`` at ``parts`` (org, user, space, path, id)."""
    out = bytearray(_AAD_PREFIX)
    for part in (kind, *parts):
        raw = part.encode()
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """``plaintext`` sealed under ``key``, bound to ``aad``, with a fresh random nonce."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return VERSION + nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def unseal(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    """What :func:`seal` sealed; ``SealBroken`` for a wrong key, a moved or a changed value."""
    if len(sealed) < 1 + NONCE_BYTES + 16 or sealed[:1] != VERSION:
        raise SealBroken("a sealed value has an unknown format")
    nonce, body = sealed[1 : 1 + NONCE_BYTES], sealed[1 + NONCE_BYTES :]
    try:
        return AESGCM(key).decrypt(nonce, body, aad)
    except InvalidTag:
        raise SealBroken("a sealed value does not open with this key where it is") from None


def seal_text(key: bytes, text: str | None, aad: bytes) -> bytes | None:
    return None if text is None else seal(key, text.encode(), aad)


def unseal_text(key: bytes, sealed: bytes | None, aad: bytes) -> str | None:
    return None if sealed is None else unseal(key, sealed, aad).decode()


def name_of(key: bytes, *parts: str) -> str:
    """The name a person's path is kept under: ``~`` and a keyed digest of where it is.

    HMAC-SHA256 under the person's key over ``bound("name", org, user, space,
    path)``, in URL-safe base64 without padding. The same path in the same
    space always has the same name, so rows are found by it; without the key
    nobody can tell which path a name stands for, and once the key is
    destroyed nobody can. The ``~`` marks it for whoever reads the tables.
    """
    mac = hmac.new(key, bound("name", *parts), hashlib.sha256).digest()
    return "~" + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def person_aad(org: str, user: str) -> bytes:
    return bound("person-key", org, user)


def wrap_person_key(store_key: bytes, org: str, user: str, person_key: bytes) -> bytes:
    return seal(store_key, person_key, person_aad(org, user))


def unwrap_person_key(store_key: bytes, org: str, user: str, wrapped: bytes) -> bytes:
    return unseal(store_key, wrapped, person_aad(org, user))


def key_check(store_key: bytes) -> str:
    """The value a database keeps to tell, at open, whether it was sealed under ``store_key``."""
    return hmac.new(store_key, CHECK_LABEL, hashlib.sha256).hexdigest()


def format_store_key(store_key: bytes) -> bytes:
    """The store key file's bytes: 64 hex digits and a newline."""
    return store_key.hex().encode() + b"\n"


def parse_store_key(data: bytes, *, path: str) -> bytes:
    """The store key in a key file's bytes; ``ConfigError`` naming ``store_key_file`` otherwise."""
    text = data.strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"store_key_file does not hold a memfs store key ({KEY_BYTES * 2} hex digits)",
            path=path,
        )
    return key


def same_key_check(stored: str, store_key: bytes) -> bool:
    """Whether ``stored`` is the key check of ``store_key`` (compared in constant time)."""
    return hmac.compare_digest(stored, key_check(store_key))


def require_key_check(stored: str, store_key: bytes, *, path: str) -> None:
    """Refuse a store key that is not the one the database was sealed under."""
    if not same_key_check(stored, store_key):
        raise ConfigError(
            "store_key_file holds another key than the one this store was sealed under; "
            "every daemon and memfs command on one store must name the same store_key_file",
            path=path,
        )
