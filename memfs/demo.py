"""The demo: one loan desk, two people, two agent turns driven by a real bash script.

By default it starts the daemon (``memfs daemon``) on the embedded SQLite
store, and each person's agent works in a mounted session through the FUSE
mount; the demo prints the note each agent gets, what its shell printed, the
commit result and the access log of each turn, and the history of the rules
file with its provenance. Then it makes Ada, the reviewer, a member of the
bank who may sign in (as ``memfs people add`` and ``memfs token create``
do), prints the Memory tab's address (``http://127.0.0.1:8330/login``)
with her token, and keeps the daemon, and so the mount and the Memory tab,
running until Ctrl-C or SIGTERM (``keep_running=False`` stops it at once).
``copy_mode=True`` runs the same story without FUSE, in copy mode.

Copy mode makes a read-only space's copy read-only by its mode bits alone,
which root ignores: run as root, Carol's shell can change her copy of the
rules. The demo says so when it happens, and shows from the turn's result
that ending the turn discarded the change; a FUSE mount refuses root too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from memfs.client import Client
from memfs.core.defaults import DEFAULT_WEB_LISTEN
from memfs.core.errors import DaemonUnavailable
from memfs.core.members import Member
from memfs.core.models import By, SpaceRef
from memfs.core.specs import org_memory, user_memory
from memfs.engine.turns import Memory
from memfs.private import open_private
from memfs.stores.base import ManagedStore, Members, ReviewingStore, Store
from memfs.stores.keyfile import default_key_file
from memfs.stores.open import open_store, parse_store_url

Say = Callable[[str, Any], None]

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}

DANA_AGENT = """\
set -eu
ls -R .
mkdir -p lending-rules/income
echo '- Self-employed applicants: two years of SA302s.' >> lending-rules/income/self-employed.md
printf 'Answer in three bullet points at most.\\n' > me/preferences.md
grep -rn 'SA302' .
"""

CAROL_AGENT = """\
set -u
cat lending-rules/income/self-employed.md
# An officer may not change the rules: the folder is read-only for this turn.
echo '- Approve any score above 600.' >> lending-rules/income/self-employed.md \\
  && echo 'the write to the rules went through' || echo 'could not write the rules'
echo 'Prefers tables.' > me/preferences.md
"""

STORY = (
    ("demo-dana", DANA, "Self-employed applicants need two years of SA302s.", DANA_AGENT),
    ("demo-carol", CAROL, "Approve any score above 600.", CAROL_AGENT),
)

CONFIG = """\
mount_root = "{mount_root}"
state_dir = "{state_dir}"
store = "{store}"
org = "bankId"  # a turn belongs to one org: every space below is that bank's
web_listen = "{web_listen}"  # the Memory tab

[[memory]]
layer = "org"
space = "lending-rules"
description = "The bank's shared lending rules. Only underwriters may change them."
can_write = {{ role = ["underwriter"] }}
by = {{ id = "userId", label = "name", role = "role" }}

[[memory]]
layer = "user"
space = "me"
user = "userId"
label = "name"
description = "This person's own preferences, such as how they like answers."
"""

RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")
ADA = By(id="u_ada", label="Ada", role="member")
# Ada as the store keeps her to sign in: the same id as the reviewer above.
ADA_MEMBER = Member(id="u_ada", org="bank_17", role="member", label="Ada")


def _agent(root: Path, script: str) -> str:
    done = subprocess.run(
        ["bash", "-c", script], cwd=root, capture_output=True, text=True, check=False
    )
    return done.stdout + done.stderr


def _start_daemon(config: Path, log: Path, socket: Path) -> subprocess.Popen[bytes]:
    # The log names sessions and spaces: private, like all of state_dir.
    with os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session: a Ctrl-C reaches the demo alone, which stops
            # the daemon with one SIGTERM (a second, mid-stop, would kill it).
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DaemonUnavailable(f"the daemon exited{_why(log)}; see {log}", path=str(socket))
        try:
            with Client(socket) as client:
                client.status()
            return proc
        except DaemonUnavailable:
            time.sleep(0.1)
    proc.kill()
    raise DaemonUnavailable(f"the daemon did not start in 30 s; see {log}", path=str(socket))


def _why(log: Path) -> str:
    """The daemon's own last error line in ``log`` (``: memfs: error: ...``), or ""."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [line for line in lines if line.startswith("memfs: error: ")]
    return f" ({errors[-1]})" if errors else ""


def run_daemon_demo(
    state_dir: Path,
    store_url: str,
    say: Say,
    *,
    web_listen: str = DEFAULT_WEB_LISTEN,
    keep_running: bool = True,
) -> None:
    """The story on the real daemon: FUSE mounts, the control API, a bash agent, the Memory tab.

    ``web_listen`` is where the daemon serves the Memory tab (``""``: not at
    all; the folder store has none). With ``keep_running`` the daemon runs
    on after the story until SIGINT or SIGTERM reaches the demo, which then
    stops it; a daemon that stops by itself is a ``DaemonUnavailable``.
    """
    if parse_store_url(store_url)[0] == "folder":
        web_listen = ""  # it keeps no members to sign in: the daemon would refuse the tab
    config = state_dir / "demo.toml"
    # The daemon's store key (its default, <state_dir>/store.key); the demo's own
    # reviews and sign-in open the store with the same one.
    key_file = default_key_file(state_dir)
    with os.fdopen(open_private(config, os.O_WRONLY | os.O_TRUNC), "w") as out:
        out.write(
            CONFIG.format(
                mount_root=state_dir / "mnt",
                state_dir=state_dir,
                store=store_url,
                web_listen=web_listen,
            )
        )
    socket = state_dir / "memfs.sock"
    log = state_dir / "daemon.log"
    # SIGTERM (a job runner stopping the demo) ends it as Ctrl-C does: through
    # the finally below, which stops the daemon, never leaving it behind.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        _run_and_keep(config, log, socket, store_url, key_file, say, web_listen, keep_running)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_and_keep(
    config: Path,
    log: Path,
    socket: Path,
    store_url: str,
    key_file: Path,
    say: Say,
    web_listen: str,
    keep_running: bool,
) -> None:
    proc = _start_daemon(config, log, socket)
    try:
        with Client(socket) as client:
            for session, person, prompt, script in STORY:
                started = client.start_turn(session, person, prompt)
                say(f"note for {person['name']}'s turn (mounted at {started.root})", started.note)
                say(f"{person['name']}'s agent (bash)", _agent(Path(started.root), script))
                ended = client.end_turn(session)
                say(
                    f"result of {person['name']}'s turn",
                    json.dumps(ended.model_dump(mode="json")["spaces"], indent=2),
                )
                say(
                    f"access log of {person['name']}'s turn (what the filesystem saw)",
                    json.dumps(ended.model_dump(mode="json")["files"], indent=2),
                )
                client.close_session(session)
                if person is DANA:
                    trio.run(_review, store_url, key_file, say)
        trio.run(_show_history, store_url, key_file, say)
        if web_listen:
            trio.run(_sign_in_ada, store_url, key_file, web_listen, say)
        if keep_running:
            _wait_for_stop(proc, log, web_listen, say)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


async def _sign_in_ada(store_url: str, key_file: Path, web_listen: str, say: Say) -> None:
    """Let Ada sign in to the Memory tab, as ``memfs people add`` and ``memfs token create`` do."""
    from memfs.cli_people import operator

    store = open_store(store_url, key_file=key_file)
    try:
        if not isinstance(store, Members):
            return
        await store.add_member(ADA_MEMBER, by=operator())
        issued = await store.create_token(ADA_MEMBER.id, ADA_MEMBER.org, by=operator())
    finally:
        await store.aclose()
    base = f"http://{web_listen}"
    say(
        f"the Memory tab: Ada ({ADA_MEMBER.role} of {ADA_MEMBER.org}) signs in",
        f"Open {base}/login and paste her token (shown once; the store keeps only its hash):\n"
        f"{issued.token}\n"
        f'Or ask its API: curl -H "Authorization: Bearer {issued.token}" {base}/api/v1/me\n'
        f"(as memfs people add {ADA_MEMBER.id} --org {ADA_MEMBER.org} --role "
        f"{ADA_MEMBER.role} --name Ada, then memfs token create {ADA_MEMBER.id} "
        f"--org {ADA_MEMBER.org})",
    )


def _wait_for_stop(proc: subprocess.Popen[bytes], log: Path, web_listen: str, say: Say) -> None:
    """Keep the daemon running until Ctrl-C or SIGTERM (a ``KeyboardInterrupt`` here)."""
    what = "The mount, the control API and the Memory tab" if web_listen else "The mount"
    say(
        "the daemon keeps running",
        f"{what} stay up until Ctrl-C (or SIGTERM); the daemon's log is {log}.",
    )
    try:
        proc.wait()
    except KeyboardInterrupt:
        say("stopping the daemon", "It unmounts; the store keeps everything.")
        return  # the caller's finally stops it
    raise DaemonUnavailable(f"the daemon stopped by itself{_why(log)}; see {log}")


async def _review(store_url: str, key_file: Path, say: Say) -> None:
    """A person reviews what waits: the lending rules are shared, so a change waits for one."""
    store = open_store(store_url, key_file=key_file)
    try:
        await _review_with(store, say)
    finally:
        await store.aclose()


async def _review_with(store: Store, say: Say) -> None:
    if isinstance(store, ReviewingStore):
        for change in await store.list_changes(org="bank_17"):
            files = sorted(change.files)
            decided = await store.decide(change.id, "approve", by=ADA)
            say(
                f"Ada (member) approves change {change.id} from {change.session}",
                json.dumps({"files": files, "state": decided.state}, indent=2),
            )


async def _show_history(store_url: str, key_file: Path, say: Say) -> None:
    store = open_store(store_url, key_file=key_file)
    try:
        if isinstance(store, ManagedStore):
            history = await store.history(RULES, "income/self-employed.md")
            say(
                "history of lending-rules/income/self-employed.md",
                json.dumps([r.model_dump(mode="json") for r in history], indent=2),
            )
    finally:
        await store.aclose()


async def run_copy_demo(store_url: str, key_file: Path, workdir: Path, say: Say) -> None:
    """The same story in copy mode: no FUSE, the spaces copied into folders."""
    store = open_store(store_url, key_file=key_file)
    memory = Memory(
        store,
        [
            org_memory(
                space="lending-rules",
                description="The bank's shared lending rules. Only underwriters may change them.",
                can_write=lambda eb: eb.get("role") == "underwriter",
                by=lambda eb: {"id": eb["userId"], "label": eb["name"], "role": eb["role"]},
            ),
            user_memory(
                description="This person's own preferences, such as how they like answers."
            ),
        ],
        org="bankId",
        workdir=workdir,
    )
    try:
        for session, person, prompt, script in STORY:
            turn = await memory.start_turn(session, person, prompt=prompt)
            say(f"note for {person['name']}'s turn", turn.note)
            agent_output = await trio.to_thread.run_sync(_agent, turn.root, script)
            say(f"{person['name']}'s agent (bash)", agent_output)
            read_only = sorted(name for name, mount in turn.mounts.items() if mount.read_only)
            result = await turn.end()
            summary = result.summary()
            say(f"result of {person['name']}'s turn", json.dumps(summary, indent=2))
            for name in read_only:
                _say_root_wrote_a_copy(person["name"], name, summary["spaces"][name], say)
            if person is DANA:
                await _review_with(store, say)
    finally:
        await store.aclose()
    await _show_history(store_url, key_file, say)


def _say_root_wrote_a_copy(person: str, name: str, outcome: dict[str, Any], say: Say) -> None:
    """Say plainly that copy mode could not stop root, if a read-only copy was changed."""
    changed = [*outcome["created"], *outcome["updated"], *outcome["deleted"]]
    if not changed or os.geteuid() != 0:
        return
    what = ", ".join(f"{name}/{path}" for path in changed)
    if outcome["status"] == "skipped":
        end = (
            "Ending the turn discarded that change (not_saved above), so nothing of it "
            "reached the store."
        )
    else:
        end = f"Ending the turn did not discard it: the space is {outcome['status']}."
    say(
        "copy mode cannot stop root",
        f"{name}/ was read-only for {person}'s turn, but copy mode marks a read-only "
        "copy by its mode bits alone, and root (this demo's user) ignores them: "
        f"{person}'s shell changed the copy ({what}). {end} The FUSE mount "
        "(without --copy-mode) refuses root too (EROFS).",
    )


__all__ = ["run_copy_demo", "run_daemon_demo"]
