"""Memory specs: the kind of each spec, told apart at the door that takes an app's specs."""

from __future__ import annotations

import pytest

import memfs
from memfs.core.errors import ConfigError
from memfs.core.models import TurnContext
from memfs.core.specs import MemorySpec, OrgMemory, PersistentDir, UserMemory, as_spec
from memfs.stores.memory import MemoryStore


async def _load(ctx: TurnContext) -> dict[str, bytes]:
    return {}


async def _store(*args: object, **kwargs: object) -> None:
    return None


def test_as_spec_gives_back_each_kind_as_itself() -> None:
    org = memfs.org_memory(space="rules")
    me = memfs.user_memory()
    notes = memfs.persistent_dir(path="notes", load=_load, store=_store)
    specs: list[MemorySpec] = [org, me, notes]  # what a list of several kinds is typed as
    kinds = [as_spec(spec) for spec in specs]
    assert kinds == [org, me, notes] and all(a is b for a, b in zip(kinds, specs, strict=True))
    assert [type(k) for k in kinds] == [OrgMemory, UserMemory, PersistentDir]
    assert [k.layer for k in kinds] == ["org", "user", "dir"]


class HomeMadeSpec(MemorySpec):
    """A spec of no kind memfs knows: not built by org_memory, user_memory or persistent_dir."""


@pytest.mark.parametrize("spec", [HomeMadeSpec(path="x"), {"space": "rules"}, "rules"])
def test_anything_but_the_three_kinds_is_a_config_error_naming_the_spec_functions(
    spec: object,
) -> None:
    with pytest.raises(ConfigError, match=r"built with org_memory\(\), user_memory\(\)"):
        as_spec(spec)


def test_memory_takes_a_list_of_several_kinds_and_refuses_a_home_made_spec() -> None:
    mixed: list[MemorySpec] = [memfs.org_memory(space="rules"), memfs.user_memory()]
    memory = memfs.Memory(MemoryStore(), mixed)
    assert [type(spec) for spec in memory.specs] == [OrgMemory, UserMemory]
    with pytest.raises(ConfigError, match="built with org_memory"):
        memfs.Memory(MemoryStore(), [*mixed, HomeMadeSpec(path="x")])
