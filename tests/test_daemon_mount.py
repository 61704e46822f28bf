"""Real mounts: the daemon serves turns as directories; real commands change them."""

from __future__ import annotations

from pathlib import Path

import memfs
from memfs.api.models import StartTurnRequest
from tests.daemon_harness import running_daemon, sh

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}

SPECS = [
    memfs.org_memory(
        space="lending-rules",
        org="bankId",
        description="The bank's lending rules.",
        can_write=lambda eb: eb.get("role") == "underwriter",
    ),
    memfs.user_memory(),
]


async def test_echo_and_cat_through_a_mounted_turn(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        started = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=DANA))
        root = Path(started.root)
        await sh("echo hello >> me/prefs.md && cat me/prefs.md && ls -la me", root)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "saved"
        assert ended.spaces["me"].created == ["prefs.md"]
        assert ended.files["me/prefs.md"].wrote
        again = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=DANA))
        out = await sh("cat me/prefs.md", Path(again.root))
        assert out.stdout == b"hello\n"
        await daemon.service.end_turn("s1")
