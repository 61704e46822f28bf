"""Hostile tests of today's own fixes: each pins a promise a hurried fix broke.

Each test is named for the behaviour it should have and says, in a comment,
what the attack is and which code it comes from. They fail on the code they
were written against.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

import memfs
from memfs.cli import main
from memfs.core.errors import BadRequest, StoreUnavailable
from memfs.core.models import TurnContext
from memfs.stores.memory import MemoryStore
from tests.test_attack_web import BAD, LIMITS, throttled
from tests.test_web_pages import Site

BURST = 12

__all__ = ["throttled"]  # the fixture, shared with test_attack_web


async def tokens_looked_at(site: Site) -> int:
    """How many bad tokens the store was asked about: each is audited ``sign-in-failed``."""
    return sum(1 for e in await site.memory.store.audit() if e.action == "sign-in-failed")


# -- the sign-in throttle: tries in flight count --------------------------------------


async def test_an_api_client_with_a_good_token_is_never_throttled_by_its_own_concurrent_requests(
    throttled: Site,
) -> None:
    # Attack (on ourselves): an API client (a script, the CLI's web client)
    # sends a dozen requests at once with its one good bearer token.
    # memfs.core.signin.SigninThrottle.attempt (memfs.web.api.member) counts
    # every try in flight as a failure until resolve_token answers, so the
    # fourth good request in flight is refused 429 "too many failed sign-ins"
    # though no sign-in ever failed.
    token = throttled.memory.tokens["member"]
    statuses: list[int] = []

    async def ask() -> None:
        answer = await throttled.client.get(
            "/api/v1/me", headers={"Authorization": f"Bearer {token}"}
        )
        statuses.append(answer.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(BURST):
            nursery.start_soon(ask)
    assert statuses == [200] * BURST, sorted(statuses)


async def test_a_store_outage_during_sign_in_does_not_count_as_failed_sign_ins(
    throttled: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack: the store is briefly unavailable while a legitimate client calls
    # the API (every call 503). memfs.web.api.member counts the try at
    # SigninThrottle.attempt and only takes it off at passed(), after
    # resolve_token; an exception (or a cancelled request) in between leaves
    # it counted as a failed sign-in. When the store is back, the client with
    # a good token is refused 429 for the whole window.
    token = throttled.memory.tokens["member"]
    store = throttled.memory.store
    real = store.resolve_token

    async def down(token: str) -> object:
        raise StoreUnavailable("the database is restarting")

    monkeypatch.setattr(store, "resolve_token", down)
    for _ in range(LIMITS.signin_failures):
        answer = await throttled.client.get(
            "/api/v1/me", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 503, answer.text
    monkeypatch.setattr(store, "resolve_token", real)
    answer = await throttled.client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text


async def test_a_good_sign_in_at_login_does_not_buy_more_token_guesses_at_the_api(
    throttled: Site,
) -> None:
    # Attack: a member guesses other people's tokens at /api/v1 and, before
    # the throttle refuses, signs in at /login with their own good token.
    # SigninThrottle.succeeded (memfs.web.pages.signin.login) clears the
    # client's failures, while the API's own rule (SigninThrottle.passed) is
    # that a good token never buys new guesses: one member's /login between
    # bursts lets them look up any number of tokens within one window.
    for _ in range(4):
        for _ in range(LIMITS.signin_failures - 1):
            await throttled.client.get("/api/v1/me", headers={"Authorization": f"Bearer {BAD}"})
        signed_in = await throttled.sign_in("member")
        # Good, or refused once the guesses reached the limit: it clears nothing.
        assert signed_in.status_code in (303, 429), signed_in.text
    assert await tokens_looked_at(throttled) <= LIMITS.signin_failures


# -- JSON read by memfs.core.json_input ----------------------------------------------------


def test_a_deeply_nested_extra_body_is_a_clear_error_not_a_crash() -> None:
    # Attack: --extra-body nested 100 000 arrays deep (100 kB, far within any
    # limit). memfs.cli.parse_extra_body catches JSONDecodeError and
    # RepeatedKey from memfs.core.json_input.loads, not the RecursionError the
    # decoder raises: the CLI dies with a traceback (exit 1), not a one-line
    # message and exit 2 as for any other bad --extra-body.
    deep = '{"userId": ' + "[" * 100_000 + "]" * 100_000 + "}"
    done = CliRunner().invoke(
        main, ["turn", "start", "s1", "--socket", "/nonexistent/memfs.sock", "--extra-body", deep]
    )
    assert done.exit_code == BadRequest.exit_code == 2, repr(done.exception)
    assert "--extra-body" in done.output


# -- a held change set's org --------------------------------------------------------------


async def test_forgetting_a_person_takes_their_prompt_out_of_a_held_dir_change_of_their_org(
    tmp_path: Path,
) -> None:
    # A persistent dir's ref is of no org (only the default): a held change
    # set of a manual dir paired its author with the org "default", so
    # forgetting the author in their own org (bank_17) left their prompt held.
    async def load(ctx: TurnContext) -> dict[str, bytes]:
        return {}

    async def keep(*args: object, **kwargs: object) -> None:
        return None

    specs = [
        memfs.org_memory(space="lending-rules", org="bankId"),
        memfs.persistent_dir(path="scratch", load=load, store=keep, commit="manual"),
    ]
    memory = memfs.Memory(MemoryStore(), specs, workdir=tmp_path / "w")
    body = {"userId": "u_dana", "bankId": "bank_17"}
    turn = await memory.start_turn("s1", body, prompt="okapi: my own words")
    (turn.root / "scratch" / "a.md").write_bytes(b"draft")
    ended = await turn.end()
    assert ended.held is not None and ended.held.prompt == "okapi: my own words"

    forgot = memory.forget_in_hold(ended.held, "bank_17", "u_dana")

    assert forgot.prompt is None
    assert all(space.provenance.prompt is None for space in forgot.spaces.values())
