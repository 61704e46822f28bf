"""Testing helpers for memfs stores and for apps built on memfs.

- :mod:`memfs.testing.conformance`: ``check_store(make_store)``, the store
  contract every backend passes, and ``run_check`` for one check by name.
- :mod:`memfs.testing.app`: ``test_memory()``, an in-memory store with sync
  helpers for an app's own tests.
- :mod:`memfs.testing.faults`: ``FaultyStore(inner, fail=..., delay=...)``,
  a wrapper around any store whose chosen methods fail, block or wait, for
  tests of what happens when a store misbehaves.
- :mod:`memfs.testing.mount`: ``mounted_daemon(specs)``, a real daemon on a
  temporary FUSE mount for an app's integration tests;
  :mod:`memfs.testing.pytest_plugin` offers it as the ``memfs_daemon`` fixture.
- :mod:`memfs.testing.postgres`: ``throwaway_postgres(bindir)``, a PostgreSQL
  server of a test's own in a temporary folder, removed after.
"""

from memfs.testing.app import TestMemory as TestMemory
from memfs.testing.app import test_memory as test_memory
from memfs.testing.conformance import COMMON_CHECKS as COMMON_CHECKS
from memfs.testing.conformance import FORGET_CHECKS as FORGET_CHECKS
from memfs.testing.conformance import MANAGED_CHECKS as MANAGED_CHECKS
from memfs.testing.conformance import REVIEW_CHECKS as REVIEW_CHECKS
from memfs.testing.conformance import check_store as check_store
from memfs.testing.conformance import checks_for as checks_for
from memfs.testing.conformance import run_check as run_check
from memfs.testing.faults import FaultyStore as FaultyStore
from memfs.testing.mount import FuseUnavailable as FuseUnavailable
from memfs.testing.mount import MountedDaemon as MountedDaemon
from memfs.testing.mount import mounted_daemon as mounted_daemon
from memfs.testing.postgres import ThrowawayPostgres as ThrowawayPostgres
from memfs.testing.postgres import throwaway_postgres as throwaway_postgres
