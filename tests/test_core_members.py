"""The member model, the token's format and hash, and who may manage people."""

from __future__ import annotations

import hashlib

import pytest

from memfs.core.errors import InvalidName, NameTooLong, PermissionDenied
from memfs.core.members import (
    MAX_LABEL_BYTES,
    IssuedToken,
    Member,
    looks_like_token,
    member_change,
    new_token,
    same_hash,
    token_hash,
)
from memfs.core.roles import require

ADA = Member(id="ada", org="bank-1", role="admin", label="Ada Lovelace")


def test_a_member_is_frozen_and_checked() -> None:
    assert ADA.model_dump() == {
        "id": "ada",
        "org": "bank-1",
        "role": "admin",
        "label": "Ada Lovelace",
    }
    with pytest.raises(Exception, match="frozen"):
        ADA.role = "viewer"  # type: ignore[misc]
    assert Member(id="u_dana", org="default", role="viewer").label is None
    assert Member(id="x", org="o", role="member", label="Risk / Ops").label == "Risk / Ops"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"id": ".."}, InvalidName),
        ({"id": "a/b"}, InvalidName),
        ({"id": ""}, InvalidName),
        ({"id": "bell\x07"}, InvalidName),
        ({"id": "x" * 256}, NameTooLong),
        ({"org": "../other"}, InvalidName),
        ({"org": "line\nbreak"}, InvalidName),
        ({"role": "root"}, InvalidName),
        ({"role": "Admin"}, InvalidName),
        ({"label": ""}, InvalidName),
        ({"label": "   "}, InvalidName),
        ({"label": "\x1b[31mred"}, InvalidName),
        ({"label": "x" * (MAX_LABEL_BYTES + 1)}, InvalidName),
    ],
)
def test_bad_member_fields_are_refused(fields: dict[str, str], error: type[Exception]) -> None:
    with pytest.raises(error):
        Member(**{"id": "ada", "org": "bank-1", "role": "admin", **fields})


def test_a_label_at_the_limit_is_kept() -> None:
    assert Member(id="a", org="o", role="viewer", label="é" * (MAX_LABEL_BYTES // 2)).label


def test_a_token_is_the_prefix_and_256_random_bits_and_kept_as_its_sha256() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    for token in tokens:
        assert token.startswith("memfs_") and len(token) == 49 and looks_like_token(token)
        assert token_hash(token) == hashlib.sha256(token.encode()).hexdigest()
    assert not looks_like_token("memfs_short")
    assert not looks_like_token("other_" + "A" * 43)
    assert not looks_like_token(None)


def test_hashes_compare_equal_only_when_equal() -> None:
    token = new_token()
    assert same_hash(token_hash(token), token_hash(token))
    assert not same_hash(token_hash(token), token_hash(new_token()))


def test_an_issued_token_never_prints_its_secret() -> None:
    issued = IssuedToken(token=new_token(), member=ADA)
    assert issued.token not in repr(issued) and issued.token not in str(issued)
    assert issued.token not in f"{issued}"


def test_what_a_change_to_a_member_says_names_the_role_never_the_label() -> None:
    assert member_change(None, ADA) == "role admin"
    assert member_change(ADA, ADA) is None
    viewer = ADA.model_copy(update={"role": "viewer"})
    assert member_change(ADA, viewer) == "role admin -> viewer"
    renamed = ADA.model_copy(update={"label": "Countess"})
    assert member_change(ADA, renamed) == "label changed"
    both = viewer.model_copy(update={"label": None})
    assert member_change(ADA, both) == "role admin -> viewer, label changed"


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_only_admins_manage_people(role: str) -> None:
    require("admin", "manage-people")
    with pytest.raises(PermissionDenied, match=f"{role} may not manage-people"):
        require(role, "manage-people")
