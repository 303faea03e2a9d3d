"""The body tag of peer requests: sealed bodies pass however they are cut into
messages; a changed, cut or untagged body raises BadDigest at its end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.types import Message

from backends.core.errors import BadDigest, IncompleteBody
from gateway.cluster.bodyseal import TAG_BYTES, seal, unseal

KEY = b"k" * 32


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


async def _sealed(data: bytes) -> bytes:
    return b"".join([c async for c in seal(_chunks(data, 1000), KEY)])


async def _receive_all(sent: bytes, piece: int, *, length: bool = True) -> bytes:
    messages: list[Message] = [
        {"type": "http.request", "body": sent[i:i + piece],
         "more_body": i + piece < len(sent)} for i in range(0, max(len(sent), 1), piece)]

    async def receive() -> Message:
        return messages.pop(0)
    headers = [(b"content-length", str(len(sent)).encode())] if length else \
        [(b"transfer-encoding", b"chunked")]
    scope, unsealed = unseal({"type": "http", "headers": headers}, receive, KEY)
    if length:
        assert dict(scope["headers"])[b"content-length"] == str(len(sent) - TAG_BYTES).encode()
    out = b""
    while True:
        message = await unsealed()
        out += message["body"]
        if not message["more_body"]:
            return out


@pytest.mark.parametrize("piece", [1, 7, 31, 32, 33, 4096])
async def test_a_sealed_body_passes_whatever_its_pieces(piece: int) -> None:
    data = bytes(range(256)) * 20
    sent = await _sealed(data)
    assert len(sent) == len(data) + TAG_BYTES
    assert await _receive_all(sent, piece) == data
    assert await _receive_all(await _sealed(b""), piece, length=False) == b""


@pytest.mark.parametrize("where", [0, 100, -1])
async def test_a_changed_body_or_tag_is_refused(where: int) -> None:
    sent = bytearray(await _sealed(b"payload " * 100))
    sent[where] ^= 0x80
    with pytest.raises(BadDigest, match="integrity"):
        await _receive_all(bytes(sent), 64)


async def test_a_cut_or_untagged_body_is_refused() -> None:
    sent = await _sealed(b"payload " * 100)
    with pytest.raises(BadDigest):
        await _receive_all(sent[:-1], 64, length=False)
    with pytest.raises(BadDigest, match="missing"):
        await _receive_all(b"short", 64, length=False)
    with pytest.raises(IncompleteBody):
        await _receive_all(b"short", 64)


def test_a_request_without_a_body_passes_unchanged() -> None:
    async def receive() -> Message:
        raise AssertionError
    scope = {"type": "http", "headers": [(b"content-length", b"0")]}
    assert unseal(scope, receive, KEY) == (scope, receive)
