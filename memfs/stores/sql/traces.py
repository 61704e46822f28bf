"""What each turn saw and did: a ``Trace`` kept as JSON, what of it is a person's sealed.

A trace names the files a turn opened and changed and carries the prompt.
Where the turn mounted a person's own memory, that much is the person's
(``Trace.part_of``): it is kept in ``trace_parts``, one row per (trace,
person), sealed under the person's key (``memfs.core.sealing``) and bound to
(org, user, session, turn). ``traces.data`` keeps only the rest (the org's
record, ``Trace.without_user`` for each person, no prompt).

The prompt is the words of everyone the trace names as theirs
(``Trace.holders``: the people, and the author). It is sealed once, under a
random key of its own, in ``traces.sealed_prompt``; that key is split into
one XOR share per holder, and each share is kept in the holder's part. So
the prompt opens only while every holder's part does: forgetting any one of
them destroys it, wherever a copy of the rows is, even for whoever still
holds the others' keys. ``people`` is how many parts a trace has.

So:

- forgetting a person deletes their parts with their key, and any copy of a
  part left elsewhere (free pages, a WAL, a backup) is ciphertext nobody can
  open; the rest never held anything of theirs;
- forgetting one file of a person opens their parts, drops the file
  (``Trace.without_file``) and seals them again.

A trace is recorded once per (session, turn): a turn end repeated after a
crash traces nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from memfs.core import sealing
from memfs.core.forgetting import trace_kept
from memfs.core.models import SpaceRef, Trace
from memfs.core.story import trace_matches
from memfs.stores.sql.db import Db, chunks, marks
from memfs.stores.sql.rows import _person_forgotten_at
from memfs.stores.sql.sealed import Sealer, _person_key

_KIND = "trace"
_COLUMNS = "SELECT id, data, people, sealed_prompt FROM traces"


def _part_sealer(db: Db, org: str, user: str, *, create: bool) -> Sealer | None:
    key = _person_key(db, org, user, create=create)
    # Space "": a part belongs to the person, across their spaces.
    return None if key is None else Sealer(key, org, user, "")


def _public(trace: Trace) -> Trace:
    """The trace without any person's part or anyone's prompt: what ``traces.data`` keeps."""
    for org, user in trace.people():
        trace = trace.without_user(user, org) or trace
    return trace.model_copy(update={"prompt": None}) if trace.holders() else trace


def _prompt_aad(trace: Trace) -> bytes:
    return sealing.bound("trace-prompt", trace.session, trace.turn)


def _keep_parts(db: Db, trace_id: int, trace: Trace, shares: dict[tuple[str, str], bytes]) -> None:
    """Seal each holder's part of ``trace`` and share of its prompt key, in ``trace_parts``."""
    for org, user in trace.holders():
        sealer = _part_sealer(db, org, user, create=True)
        assert sealer is not None  # made just now if it was missing
        part = {
            "trace": json.loads(trace.part_of(org, user).model_dump_json()),
            "share": shares[(org, user)].hex(),
        }
        sealed = sealer.seal_json(_KIND, (trace.session, trace.turn), json.dumps(part))
        db.execute(
            'INSERT INTO trace_parts (trace_id, org, "user", sealed) VALUES (?, ?, ?, ?)'
            ' ON CONFLICT (trace_id, org, "user") DO UPDATE SET sealed = excluded.sealed',
            (trace_id, org, user, sealed),
        )


def _split(trace: Trace) -> tuple[bytes | None, dict[tuple[str, str], bytes]]:
    """The trace's prompt sealed under a fresh key, and that key's XOR share of each holder."""
    holders = trace.holders()
    if not holders:
        return None, {}
    key = sealing.new_key()
    shares = [sealing.new_key() for _ in holders[1:]]
    last = key
    for share in shares:
        last = bytes(a ^ b for a, b in zip(last, share, strict=True))
    by_holder = dict(zip(holders, [last, *shares], strict=True))
    if trace.prompt is None:
        return None, by_holder
    return sealing.seal(key, trace.prompt.encode(), _prompt_aad(trace)), by_holder


def _record_trace(db: Db, trace: Trace) -> None:
    trace = trace_kept(trace, lambda org, user: _person_forgotten_at(db, org, user))
    sealed_prompt, shares = _split(trace)
    row = db.one(
        "INSERT INTO traces (session, turn, at, data, people, sealed_prompt)"
        " SELECT ?, ?, ?, ?, ?, ?"
        " WHERE NOT EXISTS (SELECT 1 FROM traces WHERE session = ? AND turn = ?) RETURNING id",
        (
            trace.session,
            trace.turn,
            db.stamp(trace.at),
            _public(trace).model_dump_json(),
            len(shares),
            sealed_prompt,
            trace.session,
            trace.turn,
        ),
    )
    if row is not None:  # None: this turn was traced before
        _keep_parts(db, int(row[0]), trace, shares)


def _whole(db: Db, rows: Iterable[tuple[int, str, int, bytes | None]]) -> list[Trace]:
    """Traces from (id, data, people, sealed_prompt) rows, with the parts that still open."""
    traces: dict[int, Trace] = {}
    holders: dict[int, int] = {}
    prompts: dict[int, bytes | None] = {}
    for id_, data, count, sealed_prompt in rows:
        traces[int(id_)] = Trace.model_validate_json(data)
        holders[int(id_)] = int(count)
        prompts[int(id_)] = None if sealed_prompt is None else bytes(sealed_prompt)
    shares: dict[int, list[bytes]] = {id_: [] for id_ in traces}
    sealers: dict[tuple[str, str], Sealer | None] = {}
    for chunk in chunks(list(traces)):
        for trace_id, org, user, sealed in db.tuples(
            'SELECT trace_id, org, "user", sealed FROM trace_parts'
            f" WHERE trace_id IN ({marks(len(chunk))}) ORDER BY trace_id",
            chunk,
        ):
            if (org, user) not in sealers:
                sealers[(org, user)] = _part_sealer(db, org, user, create=False)
            sealer = sealers[(org, user)]
            if sealer is None:
                continue  # forgotten while this part was read: it is gone
            trace = traces[trace_id]
            part = json.loads(sealer.open_json(_KIND, (trace.session, trace.turn), sealed))
            traces[trace_id] = trace.with_part(Trace.model_validate(part["trace"]))
            shares[trace_id].append(bytes.fromhex(part["share"]))
    for id_, trace in traces.items():
        sealed_prompt = prompts[id_]
        if sealed_prompt is None or len(shares[id_]) != holders[id_]:
            continue  # no prompt, or one holder is forgotten: the prompt went with them
        key = bytes(sealing.KEY_BYTES)
        for share in shares[id_]:
            key = bytes(a ^ b for a, b in zip(key, share, strict=True))
        prompt = sealing.unseal(key, sealed_prompt, _prompt_aad(trace)).decode()
        traces[id_] = trace.model_copy(update={"prompt": prompt})
    return list(traces.values())


def _traces(db: Db, session: str | None) -> list[Trace]:
    if session is None:
        return _whole(db, db.tuples(f"{_COLUMNS} ORDER BY id"))
    return _whole(db, db.tuples(f"{_COLUMNS} WHERE session = ? ORDER BY id", (session,)))


def _find_traces(
    db: Db, turn: str | None, space: SpaceRef | None, since: datetime | None
) -> list[Trace]:
    """Traces of ``turn``, mounting ``space``, ended at or after ``since``, oldest first.

    SQL narrows the rows (the turn column, the time; for an org or shared
    space its name as it appears in the JSON, for a person's space the
    person's parts) so only candidates are parsed; ``trace_matches`` decides.
    """
    query = f"{_COLUMNS} WHERE 1 = 1"
    params: list[object] = []
    if turn is not None:
        query += " AND turn = ?"
        params.append(turn)
    if since is not None:
        # To the second: the exact check below settles the rest.
        query += " AND at >= ?"
        params.append(db.stamp_floor(since))
    if space is not None and space.layer == "user":
        query += ' AND id IN (SELECT trace_id FROM trace_parts WHERE org = ? AND "user" = ?)'
        params.extend((space.org, space.user or ""))
    elif space is not None:
        query += f" AND {db.contains('data')}"
        params.append('"space":' + json.dumps(space.space, ensure_ascii=False))
    found = _whole(db, db.tuples(query + " ORDER BY id", params))
    return [t for t in found if trace_matches(t, turn=turn, space=space, since=since)]


def _forget_in_traces(db: Db, user: str, org: str) -> None:
    """Delete the person's parts of every trace (the rest never held anything of theirs).

    With ``secure_delete`` on (SQLite) the rows are zeroed in the file too;
    elsewhere what is left is ciphertext under the key deleted with them.
    """
    db.execute('DELETE FROM trace_parts WHERE org = ? AND "user" = ?', (org, user))


def _forget_file_in_traces(db: Db, ref: SpaceRef, path: str) -> None:
    """Seal again, without ``path`` of ``ref``, every part of the person's that names it."""
    user = ref.user or ""
    sealer = _part_sealer(db, ref.org, user, create=False)
    if sealer is None:
        return
    for trace_id, session, turn, sealed in db.tuples(
        "SELECT trace_parts.trace_id, traces.session, traces.turn, trace_parts.sealed"
        " FROM trace_parts JOIN traces ON traces.id = trace_parts.trace_id"
        ' WHERE trace_parts.org = ? AND trace_parts."user" = ?',
        (ref.org, user),
    ):
        part = json.loads(sealer.open_json(_KIND, (session, turn), sealed))
        rewritten = Trace.model_validate(part["trace"]).without_file(ref, path)
        if rewritten is not None:
            part["trace"] = json.loads(rewritten.model_dump_json())
            db.execute(
                'UPDATE trace_parts SET sealed = ? WHERE trace_id = ? AND org = ? AND "user" = ?',
                (
                    sealer.seal_json(_KIND, (session, turn), json.dumps(part)),
                    trace_id,
                    ref.org,
                    user,
                ),
            )


def _seal_trace_rows(db: Db) -> int:
    """Split every trace kept whole (by an older memfs) into its rest and sealed parts."""
    moved = 0
    for trace_id, data in db.tuples("SELECT id, data FROM traces ORDER BY id"):
        trace = Trace.model_validate_json(data)
        if not trace.holders():
            continue
        sealed_prompt, shares = _split(trace)
        db.execute(
            "UPDATE traces SET data = ?, people = ?, sealed_prompt = ? WHERE id = ?",
            (_public(trace).model_dump_json(), len(shares), sealed_prompt, trace_id),
        )
        _keep_parts(db, int(trace_id), trace, shares)
        moved += 1
    return moved
