"""The turn journal's record format: one constructor per record, one encoder, one decoder.

A turn's ``journal`` (``<state_dir>/sessions/<session>/<turn>/journal``) is
one JSON object per line, appended and written through before the request
that made the change returns; replayed over the turn's manifest, it rebuilds
the turn after a crash (``memfsd.overlay``). Every record names its op
``o``, the mount ``m`` (the space's folder name in the session) and the path
``p`` inside that mount, and carries the fields of its op::

    f  d [g]        the file at p holds data file d (``data/<d>``) of this turn
    b  s z r [g]    the file at p holds snapshot blob sha256 s, size z, revision r
    x               the file at p is removed
    w               the file at p was written this turn (it is stored at the end)
    a  mode mt ct   the mode and mtime/ctime (nanoseconds) of the file or folder at p
    D               a folder was made at p
    R               the folder at p was removed
    E  why          a write to p was refused ("too large", "no room"): what it
                    holds is cut off and is not stored
    e               p no longer holds a cut-off file (truncated or rewritten)
    r  r            p was opened for reading; r is the revision read (None: a file of this turn)
    n  from         p was renamed from ``from`` (a path in the same mount)
    L  a            the whole access log entry of p (the ``FileAccess`` fields
                    that are set), as a compaction writes it

``g``, where present, is the path the file at p was loaded from (a snapshot
file since moved, or copied up): a forget of that path finds it by it.

Records are applied in order; a later record about a path wins. A compacted
journal (:meth:`memfsd.overlay.Overlay.compact`) holds only ``x``, ``R``,
``D``, ``a``, ``f``/``b``, ``w``, ``E`` and ``L`` records: what the turn
holds now. A torn last line (a crash mid-append) is where the journal ends;
every line before it stands.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

Record = dict[str, Any]


def holds_data(mount: str, path: str, data: int, origin: str | None = None) -> Record:
    record: Record = {"o": "f", "m": mount, "p": path, "d": data}
    if origin is not None:
        record["g"] = origin
    return record


def holds_blob(
    mount: str,
    path: str,
    sha: str | None,
    size: int,
    revision: str | None,
    origin: str | None = None,
) -> Record:
    record: Record = {"o": "b", "m": mount, "p": path, "s": sha, "z": size, "r": revision}
    if origin is not None:
        record["g"] = origin
    return record


def removed(mount: str, path: str) -> Record:
    return {"o": "x", "m": mount, "p": path}


def written(mount: str, path: str) -> Record:
    return {"o": "w", "m": mount, "p": path}


def attributes(mount: str, path: str, mode: int, mtime_ns: int, ctime_ns: int) -> Record:
    return {"o": "a", "m": mount, "p": path, "mode": mode, "mt": mtime_ns, "ct": ctime_ns}


def made_folder(mount: str, path: str) -> Record:
    return {"o": "D", "m": mount, "p": path}


def removed_folder(mount: str, path: str) -> Record:
    return {"o": "R", "m": mount, "p": path}


def cut(mount: str, path: str, why: str) -> Record:
    return {"o": "E", "m": mount, "p": path, "why": why}


def uncut(mount: str, path: str) -> Record:
    return {"o": "e", "m": mount, "p": path}


def read(mount: str, path: str, revision: str | None) -> Record:
    return {"o": "r", "m": mount, "p": path, "r": revision}


def renamed(mount: str, path: str, old_path: str) -> Record:
    return {"o": "n", "m": mount, "p": path, "from": old_path}


def access_entry(mount: str, path: str, fields: Mapping[str, Any]) -> Record:
    return {"o": "L", "m": mount, "p": path, "a": dict(fields)}


def is_read(record: Mapping[str, Any]) -> bool:
    """Whether the record only says a file was read (those may be held back, see ``TurnTree``)."""
    return bool(record["o"] == "r")


# ``json.dumps`` with separators builds a new encoder per call; one serves all.
_encode_one = json.JSONEncoder(separators=(",", ":")).encode
_READ_KEYS = ("o", "m", "p", "r")  # a read record's keys, in the order ``read`` makes them


def _line(record: Mapping[str, Any]) -> str:
    # A turn's first open of each file journals an ``r`` record: that one is
    # spelled out here, with the encoder's own string quoting, so it costs no
    # encoder pass; the line is the one ``_encode_one`` makes of the same dict.
    if record["o"] == "r" and tuple(record) == _READ_KEYS:
        mount, path, revision = record["m"], record["p"], record["r"]
        if type(mount) is str and type(path) is str:
            if revision is None:
                return f'{{"o":"r","m":{_quote(mount)},"p":{_quote(path)},"r":null}}\n'
            if type(revision) is str:
                return (
                    f'{{"o":"r","m":{_quote(mount)},"p":{_quote(path)},"r":{_quote(revision)}}}\n'
                )
    return _encode_one(record) + "\n"


def encode(records: Iterable[Mapping[str, Any]]) -> bytes:
    """The journal lines of ``records``, each ending in a newline."""
    # Every string is escaped to ASCII, so one encode of the joined lines gives
    # the bytes that encoding each line would.
    return "".join([_line(record) for record in records]).encode()


def decode(journal: bytes) -> Iterator[Record]:
    """The records of a journal's bytes, in order, up to a torn last line."""
    for line in journal.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            return  # a torn last line from a crash: everything before it stands
        if not isinstance(record, dict):
            return
        yield record


__all__ = [
    "Record",
    "access_entry",
    "attributes",
    "cut",
    "decode",
    "encode",
    "holds_blob",
    "holds_data",
    "is_read",
    "made_folder",
    "read",
    "removed",
    "removed_folder",
    "renamed",
    "uncut",
    "written",
]
