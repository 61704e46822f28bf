"""The sealing rules (``memfs.core.sealing``): the format, the binding, the key file's bytes."""

from __future__ import annotations

import pytest

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.core.sealing import SealBroken


def test_a_sealed_value_opens_with_its_key_and_binding_only() -> None:
    key = sealing.new_key()
    here = sealing.bound("content", "bank-1", "dana", "me", "a.md", "7")
    sealed = sealing.seal(key, b"my diagnosis", here)
    assert sealing.unseal(key, sealed, here) == b"my diagnosis"
    assert b"my diagnosis" not in sealed
    with pytest.raises(SealBroken):
        sealing.unseal(sealing.new_key(), sealed, here)
    for elsewhere in [
        sealing.bound("content", "bank-1", "carol", "me", "a.md", "7"),  # another person
        sealing.bound("content", "bank-1", "dana", "me", "b.md", "7"),  # another path
        sealing.bound("content", "bank-1", "dana", "me", "a.md", "8"),  # another revision
        sealing.bound("prompt", "bank-1", "dana", "me", "a.md", "7"),  # another column
    ]:
        with pytest.raises(SealBroken):
            sealing.unseal(key, sealed, elsewhere)
    changed = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(SealBroken):
        sealing.unseal(key, changed, here)


def test_every_seal_draws_a_fresh_nonce() -> None:
    key = sealing.new_key()
    aad = sealing.bound("content", "o", "u", "s", "p", "1")
    sealed = [sealing.seal(key, b"same", aad) for _ in range(50)]
    nonces = {s[1 : 1 + sealing.NONCE_BYTES] for s in sealed}
    assert len(nonces) == 50
    assert all(s[:1] == sealing.VERSION for s in sealed)


def test_bindings_of_different_parts_never_encode_alike() -> None:
    # Length-prefixed: moving a separator between parts changes the bytes.
    assert sealing.bound("content", "a\0b", "c") != sealing.bound("content", "a", "b\0c")
    assert sealing.bound("content", "ab", "") != sealing.bound("content", "a", "b")


def test_a_person_key_is_wrapped_for_its_own_person_only() -> None:
    store_key, person_key = sealing.new_key(), sealing.new_key()
    wrapped = sealing.wrap_person_key(store_key, "bank-1", "dana", person_key)
    assert sealing.unwrap_person_key(store_key, "bank-1", "dana", wrapped) == person_key
    with pytest.raises(SealBroken):
        sealing.unwrap_person_key(store_key, "bank-1", "carol", wrapped)


def test_a_value_of_an_unknown_format_is_refused_not_opened() -> None:
    with pytest.raises(SealBroken, match="format"):
        sealing.unseal(sealing.new_key(), b"\x02" + bytes(40), b"")
    with pytest.raises(SealBroken, match="format"):
        sealing.unseal(sealing.new_key(), b"\x01short", b"")


def test_the_key_file_holds_64_hex_digits_and_anything_else_is_a_config_error() -> None:
    key = sealing.new_key()
    data = sealing.format_store_key(key)
    assert len(data) == 65 and data.endswith(b"\n")
    assert sealing.parse_store_key(data, path="k") == key
    for bad in [b"", b"zz" * 32, key.hex()[:-2].encode(), b"\xff" * 64]:
        with pytest.raises(ConfigError, match="store_key_file"):
            sealing.parse_store_key(bad, path="k")


def test_the_key_check_tells_the_sealing_key_from_another() -> None:
    key = sealing.new_key()
    sealing.require_key_check(sealing.key_check(key), key, path="k")
    with pytest.raises(ConfigError, match="store_key_file") as caught:
        sealing.require_key_check(sealing.key_check(key), sealing.new_key(), path="/etc/k")
    assert caught.value.path == "/etc/k"
    assert key.hex() not in sealing.key_check(key)
