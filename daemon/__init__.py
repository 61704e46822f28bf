"""memfsd: the memfs daemon (pyfuse3 + trio). Installed from ``daemon/`` as ``memfsd``.

Step 2 builds the FUSE mount, control API and systemd glue here; the daemon
stays a thin adapter over :mod:`memfs.core` and :mod:`memfs.stores`.
"""
