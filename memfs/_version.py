"""The version of memfs, in one place: pyproject reads it, and so do the daemon and the API."""

__version__ = "0.1.0"
