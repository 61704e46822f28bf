"""ASGI apps: the daemon's control API and the app-facing handler (``my_memory``)."""

from memfs.api.my_memory import my_memory as my_memory
