"""Roles: who may do what to managed memory, and how much of a person's memory each sees."""

from __future__ import annotations

import pytest

from memfs.core.errors import InvalidName, PermissionDenied
from memfs.core.models import SpaceRef
from memfs.core.roles import ACTS, ROLES, people_view, require

DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
CAROL = SpaceRef(layer="user", space="me", org="bank-1", user="carol")
DANA_DRAFTS = SpaceRef(layer="user", space="drafts", org="bank-1", user="dana")

EXPECTED: dict[str, set[str]] = {
    "viewer": {"read"},
    "member": {"read", "review", "restore", "forget", "put"},
    "admin": set(ACTS),
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("act", ACTS)
def test_each_role_may_do_exactly_its_acts(role: str, act: str) -> None:
    if act in EXPECTED[role]:
        require(role, act)
    else:
        with pytest.raises(PermissionDenied, match=f"{role} may not {act}"):
            require(role, act)


def test_an_unknown_role_is_denied_even_reading() -> None:
    with pytest.raises(PermissionDenied, match="unknown role 'root'"):
        require("root", "read")


def test_an_unknown_act_is_a_mistake_not_a_denial() -> None:
    with pytest.raises(InvalidName):
        require("admin", "delete-everything")


def test_a_denial_says_which_roles_may() -> None:
    with pytest.raises(PermissionDenied, match="needs admin") as caught:
        require("member", "open")
    assert caught.value.http_status == 403


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_viewers_and_members_see_that_memory_exists_and_its_size_but_not_whose(role: str) -> None:
    view = people_view(role, {DANA: 40, CAROL: 7, DANA_DRAFTS: 3})
    assert view == [
        {"space": "drafts", "org": "bank-1", "bytes": 3, "person": None},
        {"space": "me", "org": "bank-1", "bytes": 7, "person": None},
        {"space": "me", "org": "bank-1", "bytes": 40, "person": None},
    ]
    assert "dana" not in repr(view) and "carol" not in repr(view)


def test_the_hidden_order_does_not_follow_the_person() -> None:
    # By user id dana (9 bytes) would come before zed (3); hidden, the size orders them.
    zed = SpaceRef(layer="user", space="me", org="bank-1", user="zed")
    view = people_view("member", {DANA: 9, zed: 3})
    assert [entry["bytes"] for entry in view] == [3, 9]


def test_admins_see_whose_memory_it_is_but_no_files() -> None:
    view = people_view("admin", {DANA: 40, CAROL: 7})
    assert view == [
        {"space": "me", "org": "bank-1", "bytes": 7, "person": "carol"},
        {"space": "me", "org": "bank-1", "bytes": 40, "person": "dana"},
    ]
    assert all(set(entry) == {"space", "org", "bytes", "person"} for entry in view)


def test_people_view_takes_only_a_persons_spaces() -> None:
    with pytest.raises(InvalidName):
        people_view("admin", {SpaceRef(layer="org", space="rules", org="bank-1"): 1})


def test_an_unknown_role_sees_nothing() -> None:
    with pytest.raises(PermissionDenied):
        people_view("guest", {DANA: 1})
