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
"""

from memfs.client import Client as Client
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
from memfs.core.models import By as By
from memfs.core.models import ChangeSet as ChangeSet
from memfs.core.models import FileMeta as FileMeta
from memfs.core.models import Limits as Limits
from memfs.core.models import Loaded as Loaded
from memfs.core.models import Provenance as Provenance
from memfs.core.models import Revision as Revision
from memfs.core.models import SpaceRef as SpaceRef
from memfs.core.models import SpaceResult as SpaceResult
from memfs.core.models import Stored as Stored
from memfs.core.models import TurnContext as TurnContext
from memfs.core.specs import org_memory as org_memory
from memfs.core.specs import persistent_dir as persistent_dir
from memfs.core.specs import user_memory as user_memory
from memfs.engine.acting import Acting as Acting
from memfs.engine.acting import act_as as act_as
from memfs.engine.turns import CommitResult as CommitResult
from memfs.engine.turns import Memory as Memory
from memfs.engine.turns import Mount as Mount
from memfs.engine.turns import Turn as Turn
from memfs.stores.base import ManagedStore as ManagedStore
from memfs.stores.base import Store as Store
from memfs.stores.open import open_store as open_store

__version__ = "0.1.0"
