"""A throwaway PostgreSQL server for tests: its own cluster in a temporary folder.

``ThrowawayPostgres`` runs Debian's ``initdb`` in a fresh temporary folder
and starts the cluster with ``pg_ctl``, listening on a unix socket in that
folder and on a free loopback port (password auth there; the socket folder
is 0700, so only its owner and root reach the socket). It never touches a
system cluster: no system data directory, socket folder or port is used.
``stop()`` stops the server and removes the folder; call it in a
``finally`` (the tests' session fixture does), so a failing run leaves
nothing behind.

initdb refuses to run as root, so under root the cluster runs as the
``postgres`` user that Debian's ``postgresql`` package makes, and the
folder is owned by it. The cluster is for tests: ``fsync`` is off, since
nothing in it must survive a crash of the machine.

``new_database()`` gives each test a database of its own, copied from a
template the caller prepared once (``CREATE DATABASE ... TEMPLATE``, far
quicker than migrating every one afresh).

Whether tests run, skip or fail without the binaries is the pure rule
``missing_postgres_action``: missing PostgreSQL skips, except under ``CI``,
where it fails the run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import quote

PG_USER = "postgres"  # the server's own superuser, and the OS user it runs as under root
START_TIMEOUT_SECONDS = 60
BINARIES = ("initdb", "pg_ctl", "postgres")


def postgres_bindir() -> Path | None:
    """Where ``initdb``, ``pg_ctl`` and ``postgres`` are: Debian's newest, or PATH; None if not."""
    candidates: list[Path] = []
    versions = Path("/usr/lib/postgresql")
    if versions.is_dir():
        numbered = [p for p in versions.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(numbered, key=lambda p: int(p.name), reverse=True)]
    found = shutil.which("initdb")
    if found is not None:
        candidates.append(Path(os.path.realpath(found)).parent)
    for bindir in candidates:
        if all(os.access(bindir / name, os.X_OK) for name in BINARIES):
            return bindir
    return None


def missing_postgres_action(
    bindir: Path | None, *, under_ci: bool, root: bool, user_exists: bool
) -> Literal["run", "skip", "fail"]:
    """Whether PostgreSQL tests run here: missing binaries skip, except under CI, where they fail.

    Under root the server needs the ``postgres`` user (initdb refuses root);
    its absence counts as PostgreSQL missing too.
    """
    if bindir is not None and (user_exists or not root):
        return "run"
    return "fail" if under_ci else "skip"


def postgres_missing_reason(bindir: Path | None) -> str:
    if bindir is None:
        return (
            "PostgreSQL is not installed here: no initdb/pg_ctl/postgres found "
            "(apt-get install postgresql)"
        )
    return (
        f"PostgreSQL needs the {PG_USER!r} user to run as under root (apt-get install postgresql)"
    )


def postgres_user_exists() -> bool:
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ThrowawayPostgres:
    """One PostgreSQL cluster in a temporary folder; ``start()``, then ``stop()`` in a finally."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="memfs-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.password = secrets.token_hex(16)
        self._names = itertools.count(1)
        self._lock = threading.Lock()
        self._started = False
        self._as: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            self._as = pwd.getpwnam(PG_USER)
            os.chown(self.root, self._as.pw_uid, self._as.pw_gid)
        os.chmod(self.root, 0o700)

    def __repr__(self) -> str:
        return f"ThrowawayPostgres({str(self.root)!r}, port={self.port})"

    def _run(self, *args: str) -> None:
        """Run a PostgreSQL program as the cluster's owner; its output goes into the error."""
        kwargs: dict[str, object] = {}
        if self._as is not None:
            kwargs = {"user": self._as.pw_uid, "group": self._as.pw_gid, "extra_groups": []}
        done = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_SECONDS,
            check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
            **kwargs,  # type: ignore[call-overload]
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}{tail}"
            )

    def start(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as is not None:
            os.chown(pwfile, self._as.pw_uid, self._as.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            PG_USER,
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-instructions",
            "--no-sync",  # nothing here must survive a crash of the machine
        )
        pwfile.unlink()
        self.start_server()

    def start_server(self) -> None:
        """Start the cluster ``start()`` made (again, after ``stop_server``)."""
        options = " ".join(
            [
                f"-k {self.root}",
                f"-p {self.port}",
                "-c listen_addresses=127.0.0.1",
                # A test cluster: nothing in it must outlive a crash of the machine.
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
            ]
        )
        self._started = True
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options,
            "-w", "-t", str(START_TIMEOUT_SECONDS), "start",
        )  # fmt: skip

    def stop_server(self) -> None:
        """Stop the server and keep its cluster, for ``start_server`` (an outage, in a test)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        """Stop the server (if it started) and remove its folder; safe to call twice."""
        try:
            # Immediate: the cluster is thrown away, so no shutdown checkpoint is worth waiting for.
            if self._started and (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            self._started = False
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL over the unix socket (trusted: no password)."""
        return f"postgresql://{PG_USER}@{quote(str(self.root), safe='')}:{self.port}/{database}"

    def tcp_url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL over loopback TCP, with the password."""
        return f"postgresql://{PG_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def execute(self, *statements: str, database: str = "postgres") -> None:
        """Run statements one by one in autocommit on ``database``."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())

    def new_database(self, template: str = "template0") -> str:
        """A fresh database copied from ``template``; its URL."""
        with self._lock:
            name = f"memfs_{next(self._names)}"
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def throwaway_postgres(bindir: Path) -> Iterator[ThrowawayPostgres]:
    """A started ``ThrowawayPostgres``, stopped and removed on the way out, failing or not."""
    server = ThrowawayPostgres(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


__all__ = [
    "ThrowawayPostgres",
    "missing_postgres_action",
    "postgres_bindir",
    "postgres_missing_reason",
    "postgres_user_exists",
    "throwaway_postgres",
]
