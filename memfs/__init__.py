"""memfs: persistent, governed memory for shell-using AI agents, as real directories."""

from memfs.core.errors import *  # noqa: F403
from memfs.stores.open import open_store as open_store
