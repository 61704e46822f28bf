"""Policy: identity resolution, read-only decisions, what ending a turn does; errors' codes."""

from __future__ import annotations

import errno

import pytest

from memfs.core import errors
from memfs.core.models import By, ChangeSet, SpaceRef
from memfs.core.policy import (
    EndAction,
    end_action,
    is_read_only,
    is_shared,
    moved_on,
    parse_cursor,
    purged_since,
    resolve,
    resolve_by,
    resolve_ref,
)
from memfs.core.specs import org_memory, persistent_dir, user_memory

BODY = {"userId": "u1", "name": "Dana", "bankId": "b17", "role": "underwriter"}


def test_resolver_reads_a_field_or_calls_a_function() -> None:
    assert resolve("bankId", BODY) == "b17"
    assert resolve(lambda eb: eb["userId"].upper(), BODY) == "U1"
    assert resolve(lambda eb: {"id": "u9", "label": "X"}, BODY) == "u9"
    assert resolve(lambda eb: 42, BODY) == "42"


@pytest.mark.parametrize("resolver", ["missing", lambda eb: None, lambda eb: ""])
def test_resolver_finding_nothing_gives_none(resolver: object) -> None:
    assert resolve(resolver, BODY) is None  # type: ignore[arg-type]


def test_resolver_returning_nonsense_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError):
        resolve(lambda eb: ["a"], BODY)


def test_org_left_out_is_default_and_a_resolver_finding_none_is_no_identity() -> None:
    assert resolve_ref(org_memory(space="rules"), BODY) == SpaceRef(layer="org", space="rules")
    with pytest.raises(errors.NoIdentity):
        resolve_ref(org_memory(space="rules", org="tenant"), BODY)


def test_user_memory_resolves_to_the_persons_space() -> None:
    ref = resolve_ref(user_memory(org="bankId"), BODY)
    assert ref == SpaceRef(layer="user", space="me", org="b17", user="u1")
    with pytest.raises(errors.NoIdentity):
        resolve_ref(user_memory(), {"name": "nobody"})


def test_persistent_dir_resolves_to_a_dir_ref() -> None:
    async def load(ctx: object) -> dict[str, str]:
        return {}

    spec = persistent_dir(path="scratch", load=load, store=load)
    assert resolve_ref(spec, {}) == SpaceRef(layer="dir", space="scratch")


def test_by_for_a_person_is_the_person_and_for_org_comes_from_the_spec() -> None:
    assert resolve_by(user_memory(), BODY) == By(id="u1", label="Dana")
    assert resolve_by(
        user_memory(user=lambda eb: {"id": "u7", "label": "Seven"}, label=None), BODY
    ) == By(id="u7", label="Seven")
    spec = org_memory(space="rules", by=lambda eb: {"id": eb["userId"], "role": eb["role"]})
    assert resolve_by(spec, BODY) == By(id="u1", role="underwriter")
    assert resolve_by(org_memory(space="rules"), BODY) is None


def test_read_only_when_the_mode_says_so_or_can_write_said_no() -> None:
    assert is_read_only("read-only", True)
    assert is_read_only("after-turn", False)
    assert is_read_only("manual", False)
    assert not is_read_only("after-turn", True)
    assert not is_read_only("manual", True)


@pytest.mark.parametrize(
    ("commit", "read_only", "stale", "changes", "action"),
    [
        ("after-turn", True, False, True, EndAction.SKIP),
        ("read-only", True, True, True, EndAction.SKIP),
        ("after-turn", False, False, False, EndAction.NOTHING),
        ("manual", False, False, True, EndAction.MANUAL),
        ("after-turn", False, True, True, EndAction.REFUSE_STALE),
        ("manual", False, True, True, EndAction.REFUSE_STALE),
        ("after-turn", False, False, True, EndAction.STORE),
    ],
)
def test_end_action_table(
    commit: str, read_only: bool, stale: bool, changes: bool, action: EndAction
) -> None:
    assert (
        end_action(
            commit=commit,  # type: ignore[arg-type]
            read_only=read_only,
            from_last_known_copy=stale,
            has_changes=changes,
        )
        is action
    )


def test_moved_on_names_only_paths_changed_after_the_cursor() -> None:
    assert moved_on(["a", "b", "c"], {"a": 5, "b": 3}, 4) == ("a",)


def test_purged_since_names_updated_files_the_store_keeps_no_revision_of() -> None:
    changes = ChangeSet(
        created={"new.md": b"n"}, updated={"kept.md": b"k", "gone.md": b"g"}, deleted=("old.md",)
    )
    assert purged_since(changes, {"kept.md": 3, "old.md": 2}) == ("gone.md",)


@pytest.mark.parametrize("cursor", ["x", "-1"])
def test_cursors_a_store_never_issued_are_refused(cursor: str) -> None:
    with pytest.raises(errors.ConfigError):
        parse_cursor(cursor)


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (errors.InvalidName, errno.EINVAL, 400),
        (errors.NameTooLong, errno.ENAMETOOLONG, 400),
        (errors.NotFound, errno.ENOENT, 404),
        (errors.ReadOnly, errno.EROFS, 403),
        (errors.Conflict, errno.EBUSY, 409),
        (errors.TooLarge, errno.EFBIG, 413),
        (errors.SpaceFull, errno.ENOSPC, 413),
        (errors.StoreUnavailable, errno.EIO, 503),
        (errors.NoIdentity, errno.EACCES, 401),
        (errors.ConfigError, errno.EINVAL, 500),
        (errors.Unsupported, errno.EPERM, 422),
        (errors.Forgotten, errno.ENOENT, 410),
    ],
)
def test_every_error_carries_errno_http_status_and_exit_code(
    error: type[errors.MemfsError], code: int, status: int
) -> None:
    exc = error("boom", path="a.md")
    assert isinstance(exc, errors.MemfsError)
    assert (exc.errno, exc.http_status) == (code, status)
    assert exc.exit_code != 0
    assert str(exc) == "boom: 'a.md'"


def test_commit_mode_outside_the_three_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError):
        org_memory(space="rules", commit="sometimes")  # type: ignore[arg-type]


def test_bad_space_name_fails_when_the_spec_is_built() -> None:
    with pytest.raises(errors.InvalidName):
        org_memory(space="Lending Rules")
    with pytest.raises(errors.InvalidName):
        user_memory(path="../escape")


def test_only_org_memory_is_shared_a_persons_and_an_apps_are_private() -> None:
    assert is_shared("org")
    assert not is_shared("user") and not is_shared("dir")
