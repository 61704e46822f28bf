"""ASGI apps: the daemon's control API (and, later, the review API and the app-facing handler)."""
