"""Where a turn's working copies live: the seam between the turn engine and its mounts.

The engine decides; a workspace lays the loaded files out for the agent and,
at turn end, says what changed. ``CopyWorkspace`` copies files into plain
folders and scans them back (O(space) both ways). The daemon's FUSE overlay
implements the same protocol and reports only the paths a turn touched.

The protocol is typed on values (:mod:`memfs.engine.plan`): a workspace gets
a turn's frozen plan, never the engine's live objects, and never calls back
into the engine except through the one ``fetch`` it is handed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Container, Mapping
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from memfs.core.diff import diff
from memfs.core.errors import MemfsError
from memfs.core.models import ChangeSet, Loaded, SpaceResult, TraceFile
from memfs.engine import copymode
from memfs.engine.plan import ManualHold, Mount, TurnPlan, TurnState

Fetch = Callable[[str, Collection[str]], Awaitable[Mapping[str, bytes]]]
"""The bytes a lean load left out: ``await fetch(mount_name, shas)`` (``{}``: cannot)."""


class Workspace(Protocol):
    def root(self, session: str) -> Path:
        """The session's directory, holding one folder per mount."""
        ...

    def contents_held(self) -> Container[str] | None:
        """The sha256s whose bytes the workspace already holds, so loads may leave them out.

        ``None``: the workspace wants every file's bytes at every turn start.
        """
        ...

    async def open(self, plan: TurnPlan, loaded: Mapping[str, Loaded], fetch: Fetch) -> None:
        """Lay out a new turn's mounts (``plan.mounts``) from what was loaded.

        A lean load's missing bytes are the workspace's to find (its cache, or
        ``fetch``). A durable workspace writes the plan down first.
        """
        ...

    async def collect(self, session: str, mount: Mount) -> tuple[ChangeSet, dict[str, MemfsError]]:
        """What the turn changed in one mount, and the paths refused, with why."""
        ...

    async def record(
        self,
        session: str,
        turn: str,
        done: Mapping[str, SpaceResult],
        kept: Mapping[str, SpaceResult],
        *,
        final: bool = False,
        state: TurnState | None = None,
    ) -> None:
        """An ending turn's mounts so far: ``done`` (stored or settled) and ``kept``
        (their store failed).

        A durable workspace remembers both, so a restart neither stores a done
        mount twice nor forgets a kept one. ``final``: every mount is done and
        ``close`` comes next, with nothing between that may fail; a durable
        workspace may then write the record down and end the turn's record in
        one go, as ``close`` would first. ``state``: the turn's plan changed
        (a person in it was forgotten): what it wrote down of the prompt, the
        extra body, each mount's ``by`` and the people forgotten is replaced
        by ``state``'s, so no copy of the old words stays.
        """
        ...

    # Whether ``access`` reports every file a turn opened or changed (a mount
    # sees them; plain folders do not).
    sees_access: bool

    def access(self, session: str) -> dict[str, TraceFile]:
        """What the session's ending turn did to each file it touched, ``<mount>/<path>``.

        Called as a turn ends, before ``close``; a workspace that cannot see
        file access returns ``{}``.
        """
        ...

    async def keep_manual(self, hold: ManualHold) -> None:
        """What an ending turn holds for ``commit_manual``: a durable workspace writes it
        down, before the turn's record goes (``record``'s ``final``, ``close``), so no
        crash or stop between the two loses it."""
        ...

    async def close(self, session: str) -> None:
        """Drop the session's working copies (every mount is stored or discarded by now)."""
        ...


class CopyWorkspace:
    """Working copies as plain folders under ``workdir/<session>/``."""

    sees_access = False

    def __init__(self, workdir: Path, *, max_file_bytes: int) -> None:
        self.workdir = workdir
        self.max_file_bytes = max_file_bytes
        self._base: dict[tuple[str, str], dict[str, bytes]] = {}
        self._loaded: dict[tuple[str, str], Loaded] = {}  # for the modes and folders

    def root(self, session: str) -> Path:
        return self.workdir / session

    def contents_held(self) -> Container[str] | None:
        return None  # every turn writes every file into a fresh folder

    async def open(self, plan: TurnPlan, loaded: Mapping[str, Loaded], fetch: Fetch) -> None:
        for name in plan.mounts:
            self._base[(plan.session, name)] = loaded[name].files
            self._loaded[(plan.session, name)] = loaded[name]
        await trio.to_thread.run_sync(self._lay_out, plan.root, plan.mounts, loaded)

    @staticmethod
    def _lay_out(root: Path, mounts: Mapping[str, Mount], loaded: Mapping[str, Loaded]) -> None:
        # A folder left by a turn this process never ended (a crash) is stale.
        copymode.remove(root)
        root.mkdir(parents=True)
        for name, mount in mounts.items():
            load = loaded[name]
            copymode.materialize(
                mount.path,
                load.files,
                read_only=mount.read_only,
                meta=load.meta,
                folders=load.folders,
            )
        copymode.seal_parents(root, [mount.path for mount in mounts.values()])

    async def collect(self, session: str, mount: Mount) -> tuple[ChangeSet, dict[str, MemfsError]]:
        base = self._base[(session, mount.name)]
        scan = await trio.to_thread.run_sync(
            partial(copymode.scan, mount.path, max_file_bytes=self.max_file_bytes)
        )
        after = dict(scan.files)
        meta = dict(scan.meta)
        loaded = self._loaded.get((session, mount.name), Loaded())
        for path in scan.refused:
            # What could not be read is left as it was, never taken as deleted.
            if path in base:
                after[path] = base[path]
                meta.pop(path, None)
        changes = diff(
            base,
            after,
            base_meta=loaded.meta,
            meta=meta,
            base_folders=loaded.folders,
            folders=scan.folders,
        )
        return changes, dict(scan.refused)

    async def record(
        self,
        session: str,
        turn: str,
        done: Mapping[str, SpaceResult],
        kept: Mapping[str, SpaceResult],
        *,
        final: bool = False,
        state: TurnState | None = None,
    ) -> None:
        return None  # copy mode keeps nothing across processes

    def access(self, session: str) -> dict[str, TraceFile]:
        # Plain folders: reads leave no mark, and a scan sees only the end state.
        return {}

    async def keep_manual(self, hold: ManualHold) -> None:
        return None  # copy mode keeps nothing across processes: the caller holds it

    async def close(self, session: str) -> None:
        for key in [key for key in self._base if key[0] == session]:
            del self._base[key]
            self._loaded.pop(key, None)
        await trio.to_thread.run_sync(copymode.remove, self.root(session))


__all__ = ["CopyWorkspace", "Fetch", "Workspace"]
