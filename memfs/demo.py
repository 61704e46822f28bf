"""The demo: one loan desk, two people, two agent turns driven by a real bash script.

It shows what memfs does end to end on the embedded SQLite store: the note
the agent gets, the shell commands the agent runs in its memory folders, the
commit result of each turn and the history of a file with its provenance.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from memfs.core.models import SpaceRef
from memfs.core.specs import org_memory, user_memory
from memfs.stores.base import ManagedStore
from memfs.stores.open import open_store
from memfs.turns import Memory

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
echo '- Approve any score above 600.' >> lending-rules/income/self-employed.md \
  && echo 'wrote the rules (as root, mode bits do not stop us; the turn still discards it)' \
  || echo 'could not write the rules: read-only'
echo 'Prefers tables.' > me/preferences.md
"""


def _agent(root: Path, script: str) -> str:
    done = subprocess.run(
        ["bash", "-c", script], cwd=root, capture_output=True, text=True, check=False
    )
    return done.stdout + done.stderr


async def run_demo(store_url: str, workdir: Path, say: Callable[[str, Any], None]) -> None:
    store = open_store(store_url)
    memory = Memory(
        store,
        [
            org_memory(
                space="lending-rules",
                org="bankId",
                description="The bank's shared lending rules. Only underwriters may change them.",
                can_write=lambda eb: eb.get("role") == "underwriter",
                by=lambda eb: {"id": eb["userId"], "label": eb["name"], "role": eb["role"]},
            ),
            user_memory(
                description="This person's own preferences, such as how they like answers."
            ),
        ],
        workdir=workdir,
    )
    try:
        for session, person, prompt, script in (
            ("demo-dana", DANA, "Self-employed applicants need two years of SA302s.", DANA_AGENT),
            ("demo-carol", CAROL, "Approve any score above 600.", CAROL_AGENT),
        ):
            turn = await memory.start_turn(session, person, prompt=prompt)
            say(f"note for {person['name']}'s turn", turn.note)
            say(
                f"{person['name']}'s agent (bash)",
                await trio.to_thread.run_sync(_agent, turn.root, script),
            )
            result = await turn.end()
            say(f"result of {person['name']}'s turn", json.dumps(result.summary(), indent=2))
        if isinstance(store, ManagedStore):
            ref = SpaceRef(layer="org", space="lending-rules", org="bank_17")
            history = await store.history(ref, "income/self-employed.md")
            say(
                "history of lending-rules/income/self-employed.md",
                json.dumps([r.model_dump(mode="json") for r in history], indent=2),
            )
    finally:
        await store.aclose()


__all__ = ["run_demo"]
