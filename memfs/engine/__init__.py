"""The turn engine: what a turn is, where its spaces come from, and how it ends.

What a turn is, as values (its frozen plan, its mounts, what it writes down
and what an ended turn holds for a manual commit), is :mod:`memfs.engine.plan`;
:mod:`memfs.engine.turns` runs turns (``memfs.Memory``); the working copies
are :mod:`memfs.engine.workspace` (copy mode in :mod:`memfs.engine.copymode`;
the daemon's FUSE overlay implements the same protocol); spaces are loaded and
stored through :mod:`memfs.engine.sources`; seed folders come in through
:mod:`memfs.engine.seeds`; people act on memory through
:mod:`memfs.engine.acting`. The rules these follow live in :mod:`memfs.core`;
this package does the I/O. Imports among these modules form no cycle, and
nothing outside ``Memory`` calls its privates (``tests/test_engine_layout.py``).
"""
