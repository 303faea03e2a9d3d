"""The key <-> path encoding: reversible, injective, plain where possible, never escaping."""

from __future__ import annotations

import random

import pytest

from backends.core.errors import InvalidBucketName, InvalidKey, KeyTooLong
from backends.core.keys import check_bucket
from backends.posix.layout import (
    LEAF_MAX,
    NAME_MAX,
    decode_name,
    encode_key,
    encode_segment,
    is_canonical,
)


def decode_path(dirs: tuple[str, ...], leaf: str) -> str:
    """The key a path stands for, the way the listing reads the tree."""
    key = ""
    for name in dirs:
        decoded = decode_name(name)
        assert decoded is not None and decoded.kind in ("segment", "continued")
        key += decoded.text if decoded.kind == "continued" else decoded.text + "/"
    decoded = decode_name(leaf)
    assert decoded is not None and decoded.kind == "segment"
    return key + decoded.text


def random_key(rng: random.Random) -> str:
    alphabet = ["a", "b", "/", "/", ".", "%", "%%", "é", "日", "🎉", " ", "-", "~", "q", "o", "c"]
    pieces = [rng.choice(alphabet) for _ in range(rng.randint(1, 12))]
    if rng.random() < 0.2:
        pieces.insert(rng.randint(0, len(pieces)), rng.choice("xé%") * rng.randint(200, 400))
    key = "".join(pieces)
    while len(key.encode()) > 1024:
        key = key[:-1]
    return key or "x"


@pytest.mark.parametrize(("key", "dirs", "leaf"), [
    ("a", (), "a"),
    ("a/b/c.txt", ("a", "b"), "c.txt"),
    (".hidden/.x", (".hidden",), ".x"),
    ("100%", (), "100%"),
    ("a%%b", (), "a%%b"),
    ("a//b", ("a", "%%q"), "b"),
    ("/lead", ("%%q",), "lead"),
    ("trail/", ("trail",), "%%q"),
    ("..", (), "%%q.."),
    ("x/./y", ("x", "%%q."), "y"),
    ("%%q", (), "%%q%25%25q"),
    ("%%", (), "%%q%25%25"),
    ("s" * LEAF_MAX, (), "s" * LEAF_MAX),
])
def test_known_encodings(key: str, dirs: tuple[str, ...], leaf: str) -> None:
    path = encode_key(key)
    assert (path.dirs, path.leaf) == (dirs, leaf)
    assert path.displaced == "%%o" + leaf
    assert decode_path(path.dirs, path.leaf) == key


def test_long_segments_are_split_into_continuations() -> None:
    segment = "é" * 600  # 1200 bytes
    names = encode_segment(segment)
    assert len(names) > 1
    assert all(n.startswith("%%c") for n in names[:-1])
    assert all(len(n.encode()) <= NAME_MAX for n in names)
    assert len(names[-1].encode()) <= LEAF_MAX
    path = encode_key("top/" + "é" * 500)
    assert path.dirs[0] == "top" and path.owners[0] == "top"
    assert all(owner is None for owner in path.owners[1:])
    assert decode_path(path.dirs, path.leaf) == "top/" + "é" * 500


def test_owners_name_the_object_a_directory_could_displace() -> None:
    assert encode_key("a/b/c").owners == ("a", "a/b")
    assert encode_key("/x").owners == (None,)  # "" is not a key
    assert encode_key("a//b").owners == ("a", "a/")


def test_random_keys_round_trip_and_never_collide() -> None:
    rng = random.Random(1234)
    seen: dict[tuple[tuple[str, ...], str], str] = {}
    for _ in range(3000):
        key = random_key(rng)
        path = encode_key(key)
        names = (*path.dirs, path.leaf, path.displaced)
        for name in names:
            assert name not in ("", ".", "..") and "/" not in name and "\0" not in name
            assert len(name.encode()) <= NAME_MAX
        assert decode_path(path.dirs, path.leaf) == key
        assert is_canonical(key, path.dirs, path.leaf)
        assert is_canonical(key, path.dirs, path.displaced)
        assert seen.setdefault((path.dirs, path.leaf), key) == key


def test_non_canonical_names_are_not_keys() -> None:
    assert not is_canonical("abc", (), "%%qabc")  # "abc" is stored plain
    assert not is_canonical("a/b", ("%%ca",), "/b")
    assert decode_name("%%zzz") is None
    assert decode_name("%%o%%cabc") is None
    assert not is_canonical("x" * 2000, (), "x")


@pytest.mark.parametrize("key", ["", "\udcff"])
def test_invalid_keys(key: str) -> None:
    with pytest.raises(InvalidKey):
        encode_key(key)


def test_key_length_limit() -> None:
    encode_key("é" * 512)  # 1024 bytes
    with pytest.raises(KeyTooLong):
        encode_key("é" * 512 + "x")


@pytest.mark.parametrize("name", ["", ".", "..", ".squall", ".x", "a/b", "a\0b", "b" * 256])
def test_invalid_bucket_names(name: str) -> None:
    with pytest.raises(InvalidBucketName):
        check_bucket(name)


def test_valid_bucket_names() -> None:
    for name in ("a", "my-bucket", "b.c", "x" * 63):
        check_bucket(name)
