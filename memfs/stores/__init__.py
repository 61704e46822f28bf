"""Stores: where memory lives. One protocol (:mod:`memfs.stores.base`), several backends."""
