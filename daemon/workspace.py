"""The daemon's workspace: turns mounted as FUSE overlays, written down to survive a crash.

Implements :class:`memfs.workspace.Workspace` over :class:`memfsd.overlay.Overlay`.
Opening a turn puts its snapshot into the blob cache and writes ``turn.json``
(everything needed to rebuild the turn) before the agent sees a file. Ending
one looks only at the paths the turn touched: O(touched), not O(space).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Container, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import trio

from memfs.core.diff import diff_touched
from memfs.core.errors import MemfsError, NotFound, StoreUnavailable, TooLarge
from memfs.core.models import ChangeSet, Loaded, SpaceResult, TraceFile
from memfs.core.policy import is_shared
from memfs.sources import StoreSource
from memfs.turns import Mount, Turn, TurnState
from memfsd.overlay import FileAccess, Overlay, Snapshot

TURN_FILE = "turn.json"
DONE_FILE = "done.json"  # the spaces of an ending turn already stored
MANIFEST_FORMAT = 1  # turn.json: a JSON header line, then NUL-separated manifest fields


class OverlayWorkspace:
    sees_access = True  # every open and change goes through the mount

    def __init__(
        self,
        overlay: Overlay,
        mount_root: Path,
        *,
        invalidate: Callable[[Sequence[tuple[int, str]]], None] | None = None,
    ) -> None:
        self.overlay = overlay
        self.mount_root = mount_root
        self._invalidate = invalidate
        self._owners: dict[str, tuple[int | None, int | None]] = {}
        self._access: dict[str, dict[str, FileAccess]] = {}

    def root(self, session: str) -> Path:
        return self.mount_root / session

    def set_owner(self, session: str, uid: int | None, gid: int | None) -> None:
        """Give the session's directory to a Unix user (mode 0700) from its next turn on."""
        self._owners[session] = (uid, gid)

    def turn_file(self, session: str) -> Path:
        return self.overlay.session_dir(session) / TURN_FILE

    def contents_held(self) -> Container[str]:
        return self.overlay.blobs.held()

    async def open(self, turn: Turn, loaded: Mapping[str, Loaded]) -> None:
        manifests: dict[str, dict[str, str]] = {}
        try:
            for name, mount in turn.mounts.items():
                manifests[name] = await self._take_blobs(mount, loaded[name])
            uid, gid = self._owners.get(turn.session, (None, None))
            await trio.to_thread.run_sync(self._write_state, turn.state(), manifests, uid, gid)
            self._attach(turn.session, turn.id, turn.mounts, manifests, uid, gid, replay=False)
        except BaseException:
            # The turn never got its mounts: what it held must not stay behind.
            for name, manifest in manifests.items():
                if not is_shared(turn.mounts[name].layer):
                    self.overlay.blobs.release(list(manifest.values()), discard=True)
            raise

    async def _take_blobs(self, mount: Mount, loaded: Loaded) -> dict[str, str]:
        """Hold the blob of every file of one mount, storing the bytes that came along.

        A lean load left out the bytes the cache held when it ran; a person's
        blob may have been discarded since (their other turn ended), and such
        bytes are fetched again from the mount's source. On failure nothing
        stays held.
        """
        blobs = self.overlay.blobs
        # A person's blobs are held by each turn over them, and go with the
        # last; shared memory's are marked shared and stay.
        private = not is_shared(mount.layer)
        paths = loaded.paths()
        brought = [path for path in paths if path in loaded.files]
        held: list[str] = []
        try:
            taken = await trio.to_thread.run_sync(
                partial(
                    blobs.put_many,
                    [loaded.files[path] for path in brought],
                    [loaded.shas.get(path) for path in brought],
                    hold=private,
                    share=not private,
                )
            )
            if private:
                held += taken
            shas = dict(zip(brought, taken, strict=True))
            if loaded.lean:
                cached = [loaded.shas[path] for path in paths if path not in shas]
                flags = await trio.to_thread.run_sync(partial(blobs.present, cached, hold=private))
                if private:
                    held += [sha for sha, here in zip(cached, flags, strict=True) if here]
                else:
                    blobs.share(cached)
                gone = [sha for sha, here in zip(cached, flags, strict=True) if not here]
                if gone:
                    fetched = await self._fetch_again(mount, gone)
                    again = await trio.to_thread.run_sync(
                        partial(blobs.put_many, fetched, gone, hold=private, share=not private)
                    )
                    if private:
                        held += again
                shas.update((path, loaded.shas[path]) for path in paths if path not in shas)
        except BaseException:
            blobs.release(held, discard=True)
            raise
        return {path: shas[path] for path in paths}

    async def _fetch_again(self, mount: Mount, gone: list[str]) -> list[bytes]:
        source = mount.source
        fetched = await source.fetch(gone) if isinstance(source, StoreSource) else {}
        if any(sha not in fetched for sha in gone):
            raise StoreUnavailable(
                "files a lean load left out are neither cached nor in the store any more",
                path=mount.name,
            )
        return [fetched[sha] for sha in gone]

    def _attach(
        self,
        session: str,
        turn: str,
        mounts: Mapping[str, Mount],
        manifests: Mapping[str, Mapping[str, str]],
        uid: int | None,
        gid: int | None,
        *,
        replay: bool,
    ) -> None:
        self.overlay.open_session(session, uid, gid)
        snapshots: dict[str, tuple[bool, dict[str, Snapshot]]] = {}
        for name, mount in mounts.items():
            sizes, revisions = mount.sizes, mount.snapshot
            snapshots[name] = (
                mount.read_only,
                {
                    path: (sha, sizes[path], revisions.get(path))
                    for path, sha in manifests[name].items()
                },
            )
        self.overlay.attach_turn(
            session,
            turn,
            snapshots,
            replay=replay,
            private={name for name, mount in mounts.items() if not is_shared(mount.layer)},
        )

    def _write_state(
        self,
        state: TurnState,
        manifests: Mapping[str, Mapping[str, str]],
        uid: int | None,
        gid: int | None,
    ) -> None:
        # The manifests go after the JSON header as NUL-separated fields
        # (NUL is the one character no path holds): encoding 10,000 files this
        # way costs a third of encoding them as JSON, at every turn start.
        header = {
            "state": state.model_dump(
                mode="json", exclude={"mounts": {"__all__": {"snapshot", "sizes"}}}
            ),
            "uid": uid,
            "gid": gid,
            "manifest": MANIFEST_FORMAT,
        }
        fields: list[str] = []
        for name, manifest in manifests.items():
            mount = state.mounts[name]
            sizes, snapshot = mount.sizes, mount.snapshot
            fields += [
                f"{name}\0{path}\0{sha}\0{sizes[path]}\0{snapshot.get(path) or ''}"
                for path, sha in manifest.items()
            ]
        body = json.dumps(header, separators=(",", ":")) + "\n" + "\0".join(fields)
        _write_atomic(self.turn_file(state.session), body)

    @staticmethod
    def _read_state(text: str) -> dict[str, Any]:
        """A turn written down by :meth:`_write_state`, as one JSON-shaped record."""
        head, _, rows = text.partition("\n")
        record: dict[str, Any] = json.loads(head)
        if "manifest" not in record:
            return record  # written whole as JSON, by a memfs before MANIFEST_FORMAT
        mounts = record["state"]["mounts"]
        shas: dict[str, dict[str, str]] = {name: {} for name in mounts}
        for mount in mounts.values():
            mount["snapshot"], mount["sizes"] = {}, {}
        parts = rows.split("\0") if rows else []
        for at in range(0, len(parts), 5):
            name, path, sha, size, revision = parts[at : at + 5]
            shas[name][path] = sha
            mounts[name]["sizes"][path] = int(size)
            if revision:
                mounts[name]["snapshot"][path] = revision
        record["shas"] = shas
        return record

    async def collect(self, session: str, mount: Mount) -> tuple[ChangeSet, dict[str, MemfsError]]:
        self.overlay.freeze(session)
        state = self.overlay.sessions[session].turn
        if state is None:
            raise NotFound("the session has no turn attached", path=session)
        tree = state.mounts[mount.name]
        # Walk the tree here, in trio, where nothing else moves it; read the
        # bytes in a thread.
        sources = {path: self.overlay.source(tree, path) for path in tree.touched}
        bases = {path: self.overlay.base(tree, path) for path in tree.touched}
        # A file a write was refused for holds only what came before the
        # refusal: it is named as not saved, never stored cut off.
        refused: dict[str, MemfsError] = {}
        for path in tree.touched:
            why = self.overlay.cut(tree, path)
            if why is not None:
                refused[path] = TooLarge(why, path=path)

        def read() -> ChangeSet:
            touched = {p: None if src is None else src.read_bytes() for p, src in sources.items()}
            base = {p: src.read_bytes() for p, src in bases.items() if src is not None}
            return diff_touched(base, touched)

        changes = await trio.to_thread.run_sync(read)
        return changes.without(refused), refused

    async def record(self, turn: Turn, name: str, result: SpaceResult) -> None:
        # A small file of its own: rewriting turn.json (the whole manifest)
        # for every stored space would cost O(space) at every turn end.
        done = {
            "turn": turn.id,
            "done": {space: r.model_dump(mode="json") for space, r in turn.done.items()},
        }
        target = self.turn_file(turn.session).with_name(DONE_FILE)
        await trio.to_thread.run_sync(_write_atomic, target, json.dumps(done))

    def access_log(self, session: str) -> dict[str, FileAccess]:
        """What the filesystem saw the session's current (or just ended) turn do."""
        tree = self.overlay.sessions.get(session)
        if tree is not None and tree.turn is not None:
            return tree.turn.access_log()
        return self._access.get(session, {})

    def access(self, session: str) -> dict[str, TraceFile]:
        """The ending turn's access log, as the store keeps it in the turn's trace."""
        return {
            key: TraceFile(**dataclasses.asdict(entry))
            for key, entry in self.access_log(session).items()
        }

    async def close(self, session: str) -> None:
        tree = self.overlay.sessions.get(session)
        if tree is not None and tree.turn is not None:
            self._access[session] = tree.turn.access_log()
            self.overlay.detach_turn(session)
        self.turn_file(session).unlink(missing_ok=True)
        self.turn_file(session).with_name(DONE_FILE).unlink(missing_ok=True)
        await self.forget_names()

    async def close_session(self, session: str) -> None:
        self.overlay.close_session(session)
        await self.forget_names()

    async def forget_names(self) -> None:
        """Tell the kernel about every name the daemon removed, before answering the caller."""
        names, self.overlay.stale_names = self.overlay.stale_names, []
        if names and self._invalidate is not None:
            await trio.to_thread.run_sync(self._invalidate, names)

    def pop_access(self, session: str) -> dict[str, FileAccess]:
        return self._access.pop(session, {})

    def saved_turns(self) -> list[dict[str, Any]]:
        """Every turn written down and never ended: what a restart must bring back."""
        sessions = self.overlay.state_dir / "sessions"
        found = []
        for path in sorted(sessions.glob(f"*/{TURN_FILE}")):
            record = self._read_state(path.read_text())
            done_file = path.with_name(DONE_FILE)
            if done_file.exists():
                done = json.loads(done_file.read_text())
                if done.get("turn") == record["state"]["turn"]:
                    record["state"]["done"] = {**record["state"].get("done", {}), **done["done"]}
            found.append(record)
        return found

    def reattach(self, turn: Turn, record: Mapping[str, Any]) -> None:
        """Bring a turn written down before a crash back under the mount, journal replayed."""
        uid, gid = record.get("uid"), record.get("gid")
        if uid is not None or gid is not None:
            self._owners[turn.session] = (uid, gid)
        manifests = record["shas"]
        for name, mount in turn.mounts.items():
            shas = list(manifests.get(name, {}).values())
            if is_shared(mount.layer):
                self.overlay.blobs.share(shas)
            else:
                self.overlay.blobs.hold(shas)
        self._attach(turn.session, turn.id, turn.mounts, manifests, uid, gid, replay=True)


def _write_atomic(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` so that a crash leaves the old file or the new, synced."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["OverlayWorkspace"]
