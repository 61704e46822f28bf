"""The pure core of memfs: models, name rules, diff, limits, policy, note and errors.

Nothing here does I/O or imports trio, a database driver or pyfuse3 (a test
checks this): values in, values out, so every rule is tested on its own.
"""
