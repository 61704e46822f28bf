"""The ``memfs`` command line.

Commands print JSON (or, for the demo, readable sections) on stdout; errors
go to stderr as one line and exit with the error's ``exit_code``. Commands
are sync and call ``trio.run`` themselves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio

from memfs.core.errors import MemfsError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STATE_DIR = "/var/lib/memfs"


def fail(exc: MemfsError) -> None:
    click.echo(f"memfs: error: {exc}", err=True)
    sys.exit(exc.exit_code)


@click.group()
@click.version_option(package_name="memfs")
def main() -> None:
    """memfs: persistent, governed memory for shell-using AI agents, as real directories."""


@main.command()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("MEMFS_STATE_DIR", DEFAULT_STATE_DIR),
    show_default="$MEMFS_STATE_DIR or /var/lib/memfs",
    help="Where the embedded SQLite store and the turns' working folders live.",
)
@click.option(
    "--store", "store_url", default=None, help="Store URL (default: sqlite in --state-dir)."
)
def demo(state_dir: Path, store_url: str | None) -> None:
    """Run two scripted agent turns (bash) against the embedded store and show what memfs saw."""
    from memfs.demo import run_demo

    state_dir = state_dir.absolute()
    state_dir.mkdir(parents=True, exist_ok=True)
    url = store_url or f"sqlite://{state_dir / 'memfs.db'}"

    def say(title: str, body: Any) -> None:
        click.echo(f"==> {title}")
        click.echo(str(body).rstrip("\n"))
        click.echo()

    click.echo(f"memfs demo: store {url}\n")
    try:
        trio.run(run_demo, url, state_dir / "turns", say)
    except MemfsError as exc:
        fail(exc)


if __name__ == "__main__":  # pragma: no cover
    main()
