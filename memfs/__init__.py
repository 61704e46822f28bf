"""memfs: persistent, governed memory for shell-using AI agents, as real directories.

The public API: open a store, declare the spaces an agent carries, and run
turns::

    store = memfs.open_store("sqlite:///var/lib/memfs/memfs.db")
    mem = memfs.Memory(store, [memfs.user_memory(description="Your preferences.")])
    turn = await mem.start_turn(session="s1", extra_body={"userId": "u1", "name": "Dana"})
    ...  # the agent works in turn.root
    result = await turn.end()

With the daemon running (``memfs daemon``), ``memfs.Client()`` does the same
over its control socket, and each turn's spaces are FUSE-mounted directories.

Every public name is re-exported here but imported on first use (PEP 562):
``import memfs.core`` loads the pure core and nothing of the engine, the
stores, the client or the web stack, and ``memfs --help`` starts fast.
"""

from typing import TYPE_CHECKING

from memfs._version import __version__ as __version__

if TYPE_CHECKING:
    from memfs.api.models import DaemonStatus as DaemonStatus
    from memfs.api.models import ForgetApplied as ForgetApplied
    from memfs.api.models import KeptTurn as KeptTurn
    from memfs.api.models import SessionClosed as SessionClosed
    from memfs.api.models import TurnEnded as TurnEnded
    from memfs.api.models import TurnStarted as TurnStarted
    from memfs.client import Client as Client
    from memfs.core.audit import AuditCheck as AuditCheck
    from memfs.core.audit import AuditPage as AuditPage
    from memfs.core.errors import AlreadyCommitted as AlreadyCommitted
    from memfs.core.errors import AuditTampered as AuditTampered
    from memfs.core.errors import BadRequest as BadRequest
    from memfs.core.errors import ConfigError as ConfigError
    from memfs.core.errors import Conflict as Conflict
    from memfs.core.errors import DaemonUnavailable as DaemonUnavailable
    from memfs.core.errors import DiskFull as DiskFull
    from memfs.core.errors import Forgotten as Forgotten
    from memfs.core.errors import IllegalTransition as IllegalTransition
    from memfs.core.errors import InvalidName as InvalidName
    from memfs.core.errors import MemfsError as MemfsError
    from memfs.core.errors import NameTooLong as NameTooLong
    from memfs.core.errors import NoIdentity as NoIdentity
    from memfs.core.errors import NotFound as NotFound
    from memfs.core.errors import PermissionDenied as PermissionDenied
    from memfs.core.errors import ReadOnly as ReadOnly
    from memfs.core.errors import SpaceFull as SpaceFull
    from memfs.core.errors import StoreUnavailable as StoreUnavailable
    from memfs.core.errors import TooLarge as TooLarge
    from memfs.core.errors import TooManyOpen as TooManyOpen
    from memfs.core.errors import TurnOpen as TurnOpen
    from memfs.core.errors import Unsupported as Unsupported
    from memfs.core.lineage import Lineage as Lineage
    from memfs.core.members import IssuedToken as IssuedToken
    from memfs.core.members import Member as Member
    from memfs.core.models import AsOfFile as AsOfFile
    from memfs.core.models import AuditEntry as AuditEntry
    from memfs.core.models import By as By
    from memfs.core.models import ChangeSet as ChangeSet
    from memfs.core.models import FileMeta as FileMeta
    from memfs.core.models import Forgot as Forgot
    from memfs.core.models import Limits as Limits
    from memfs.core.models import LiveOrigin as LiveOrigin
    from memfs.core.models import Loaded as Loaded
    from memfs.core.models import Provenance as Provenance
    from memfs.core.models import Revision as Revision
    from memfs.core.models import SpaceRef as SpaceRef
    from memfs.core.models import SpaceResult as SpaceResult
    from memfs.core.models import Stored as Stored
    from memfs.core.models import Trace as Trace
    from memfs.core.models import TraceFile as TraceFile
    from memfs.core.models import TurnContext as TurnContext
    from memfs.core.review import ReviewMode as ReviewMode
    from memfs.core.review import WaitingChange as WaitingChange
    from memfs.core.roles import Role as Role
    from memfs.core.specs import MemorySpec as MemorySpec
    from memfs.core.specs import OrgMemory as OrgMemory
    from memfs.core.specs import PersistentDir as PersistentDir
    from memfs.core.specs import Spec as Spec
    from memfs.core.specs import UserMemory as UserMemory
    from memfs.core.specs import org_memory as org_memory
    from memfs.core.specs import persistent_dir as persistent_dir
    from memfs.core.specs import user_memory as user_memory
    from memfs.core.story import Carried as Carried
    from memfs.core.story import FileLife as FileLife
    from memfs.core.story import Inbox as Inbox
    from memfs.core.story import SessionStory as SessionStory
    from memfs.core.story import SpaceUsage as SpaceUsage
    from memfs.engine.acting import Acting as Acting
    from memfs.engine.acting import act_as as act_as
    from memfs.engine.plan import ManualHold as ManualHold
    from memfs.engine.turns import CommitResult as CommitResult
    from memfs.engine.turns import Memory as Memory
    from memfs.engine.turns import Mount as Mount
    from memfs.engine.turns import Turn as Turn
    from memfs.stores.base import ManagedStore as ManagedStore
    from memfs.stores.base import Members as Members
    from memfs.stores.base import Store as Store
    from memfs.stores.open import open_store as open_store

# name -> the module that defines it
_EXPORTS = {
    "DaemonStatus": "memfs.api.models",
    "ForgetApplied": "memfs.api.models",
    "KeptTurn": "memfs.api.models",
    "SessionClosed": "memfs.api.models",
    "TurnEnded": "memfs.api.models",
    "TurnStarted": "memfs.api.models",
    "Client": "memfs.client",
    "AuditCheck": "memfs.core.audit",
    "AuditPage": "memfs.core.audit",
    "AlreadyCommitted": "memfs.core.errors",
    "AuditTampered": "memfs.core.errors",
    "BadRequest": "memfs.core.errors",
    "ConfigError": "memfs.core.errors",
    "Conflict": "memfs.core.errors",
    "DaemonUnavailable": "memfs.core.errors",
    "DiskFull": "memfs.core.errors",
    "Forgotten": "memfs.core.errors",
    "IllegalTransition": "memfs.core.errors",
    "InvalidName": "memfs.core.errors",
    "MemfsError": "memfs.core.errors",
    "NameTooLong": "memfs.core.errors",
    "NoIdentity": "memfs.core.errors",
    "NotFound": "memfs.core.errors",
    "PermissionDenied": "memfs.core.errors",
    "ReadOnly": "memfs.core.errors",
    "SpaceFull": "memfs.core.errors",
    "StoreUnavailable": "memfs.core.errors",
    "TooLarge": "memfs.core.errors",
    "TooManyOpen": "memfs.core.errors",
    "TurnOpen": "memfs.core.errors",
    "Unsupported": "memfs.core.errors",
    "Lineage": "memfs.core.lineage",
    "IssuedToken": "memfs.core.members",
    "Member": "memfs.core.members",
    "AuditEntry": "memfs.core.models",
    "By": "memfs.core.models",
    "ChangeSet": "memfs.core.models",
    "FileMeta": "memfs.core.models",
    "Forgot": "memfs.core.models",
    "Limits": "memfs.core.models",
    "Loaded": "memfs.core.models",
    "Provenance": "memfs.core.models",
    "Revision": "memfs.core.models",
    "SpaceRef": "memfs.core.models",
    "SpaceResult": "memfs.core.models",
    "Stored": "memfs.core.models",
    "Trace": "memfs.core.models",
    "TraceFile": "memfs.core.models",
    "AsOfFile": "memfs.core.models",
    "LiveOrigin": "memfs.core.models",
    "Carried": "memfs.core.story",
    "FileLife": "memfs.core.story",
    "Inbox": "memfs.core.story",
    "SessionStory": "memfs.core.story",
    "SpaceUsage": "memfs.core.story",
    "TurnContext": "memfs.core.models",
    "ReviewMode": "memfs.core.review",
    "WaitingChange": "memfs.core.review",
    "Role": "memfs.core.roles",
    "MemorySpec": "memfs.core.specs",
    "OrgMemory": "memfs.core.specs",
    "PersistentDir": "memfs.core.specs",
    "Spec": "memfs.core.specs",
    "UserMemory": "memfs.core.specs",
    "org_memory": "memfs.core.specs",
    "persistent_dir": "memfs.core.specs",
    "user_memory": "memfs.core.specs",
    "Acting": "memfs.engine.acting",
    "act_as": "memfs.engine.acting",
    "ManualHold": "memfs.engine.plan",
    "CommitResult": "memfs.engine.turns",
    "Memory": "memfs.engine.turns",
    "Mount": "memfs.engine.turns",
    "Turn": "memfs.engine.turns",
    "ManagedStore": "memfs.stores.base",
    "Members": "memfs.stores.base",
    "Store": "memfs.stores.base",
    "open_store": "memfs.stores.open",
}

__all__ = [
    "Acting",
    "AlreadyCommitted",
    "AsOfFile",
    "AuditCheck",
    "AuditEntry",
    "AuditPage",
    "AuditTampered",
    "BadRequest",
    "By",
    "Carried",
    "ChangeSet",
    "Client",
    "CommitResult",
    "ConfigError",
    "Conflict",
    "DaemonStatus",
    "DaemonUnavailable",
    "DiskFull",
    "FileLife",
    "FileMeta",
    "ForgetApplied",
    "Forgot",
    "Forgotten",
    "IllegalTransition",
    "Inbox",
    "InvalidName",
    "IssuedToken",
    "KeptTurn",
    "Limits",
    "Lineage",
    "LiveOrigin",
    "Loaded",
    "ManagedStore",
    "ManualHold",
    "Member",
    "Members",
    "MemfsError",
    "Memory",
    "MemorySpec",
    "Mount",
    "NameTooLong",
    "NoIdentity",
    "NotFound",
    "OrgMemory",
    "PermissionDenied",
    "PersistentDir",
    "Provenance",
    "ReadOnly",
    "ReviewMode",
    "Revision",
    "Role",
    "SessionClosed",
    "SessionStory",
    "SpaceFull",
    "SpaceRef",
    "SpaceResult",
    "SpaceUsage",
    "Spec",
    "Store",
    "StoreUnavailable",
    "Stored",
    "TooLarge",
    "TooManyOpen",
    "Trace",
    "TraceFile",
    "Turn",
    "TurnContext",
    "TurnEnded",
    "TurnOpen",
    "TurnStarted",
    "Unsupported",
    "UserMemory",
    "WaitingChange",
    "__version__",
    "act_as",
    "open_store",
    "org_memory",
    "persistent_dir",
    "user_memory",
]

# Defined only at run time: under a type checker, a module-level __getattr__
# would make every misspelt ``memfs.X`` pass.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'memfs' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
