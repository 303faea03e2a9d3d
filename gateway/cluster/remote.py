"""The calling side of the peer protocol: one member's storage operations, by HTTP.

Paths are ``/_squall/peer/<operation>`` with names in the query; see
:mod:`gateway.cluster.peer_api` for the serving side and docs/cluster.md for the list.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from backends.core.base import (
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    UploadInfo,
)
from backends.core.errors import ServiceUnavailable, StorageError
from backends.core.streams import ClosingBody
from gateway.cluster import wire
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.keyops import DeleteAnswer, DeleteItem
from gateway.cluster.transport import PeerResponse, PeerTransport
from gateway.cluster.view import Member, Membership

PREFIX = b"/_squall/peer/"
Overlay = list[tuple[str, ObjectInfo | None]]  # (key, info) or (key, None): a deletion


@dataclass(frozen=True, slots=True)
class UploadsSnapshot:
    """A member's multipart uploads held in its cache, and the backend uploads its
    flusher opened (to hide from listings)."""

    uploads: list[UploadInfo] = field(default_factory=list)
    hidden_ids: frozenset[str] = frozenset()
    hidden_keys: frozenset[str] = frozenset()


class PeerClient:
    """Storage operations on ``member``; its typed errors are raised here again. Calls
    are signed under the view ``view()`` names (this member's current one)."""

    def __init__(self, transport: PeerTransport, member: Member,
                 view: Callable[[], str]) -> None:
        self._transport = transport
        self.member = member
        self._view = view

    @property
    def name(self) -> str:
        return self.member.name

    async def _call(self, method: str, operation: str, params: dict[str, str], *,
                    headers: Sequence[tuple[bytes, bytes]] = (),
                    content: AsyncIterator[bytes] | bytes | None = None,
                    wait_continue: bool = True) -> PeerResponse:
        response = await self._transport.open(self.member, method,
                                              PREFIX + operation.encode(), _query(params),
                                              view=self._view(), headers=headers,
                                              content=content, wait_continue=wait_continue)
        if response.status < 300:
            return response
        await response.aclose()
        raise self._failure(operation, response.status, response.header(wire.ERROR_HEADER))

    def _failure(self, operation: str, status: int, error: str | None) -> Exception:
        """The typed error a member's answer other than 2xx stands for."""
        if error is None:
            return ServiceUnavailable(f"cluster member {self.name} answered {operation} "
                                      f"with HTTP {status} (is it running this version?)")
        return wire.error_from(json.loads(error))

    async def _json(self, method: str, operation: str, params: dict[str, str], *,
                    headers: Sequence[tuple[bytes, bytes]] = (),
                    content: AsyncIterator[bytes] | bytes | None = None,
                    wait_continue: bool = True) -> object:
        if (content is None or isinstance(content, bytes)) and \
                self._transport.direct(self.member, content):
            answer = await self._transport.call(
                self.member, method, PREFIX + operation.encode(), _query(params),
                view=self._view(), headers=headers, content=content)
            if answer.status >= 300:
                raise self._failure(operation, answer.status,
                                    answer.header(wire.ERROR_HEADER))
            return json.loads(answer.body) if answer.body else None
        response = await self._call(method, operation, params, headers=headers,
                                    content=content, wait_continue=wait_continue)
        try:
            data = b"".join([c async for c in self._transport.body(self.member, response)])
        finally:
            await response.aclose()
        return json.loads(data) if data else None

    # -- objects -----------------------------------------------------------------------
    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        response = await self._call("HEAD", "object", {"bucket": bucket, "key": key})
        await response.aclose()
        return wire.info_from(json.loads(response.header(wire.INFO_HEADER) or ""))

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        params = {"bucket": bucket, "key": key}
        if byte_range is not None:
            params.update({name: str(value) for name, value in (
                ("first", byte_range.first), ("last", byte_range.last),
                ("suffix", byte_range.suffix)) if value is not None})
        return await self._stream(await self._call("GET", "object", params), byte_range)

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None, if_match: str | None,
                         if_none_match: str | None) -> ObjectInfo:
        headers = [(b"x-squall-meta", wire.dumps(wire.to_json(meta)).encode())]
        if content_md5 is not None:
            headers.append((b"x-squall-md5", content_md5.hex().encode()))
        if if_match is not None:
            headers.append((b"x-squall-if-match", if_match.encode("latin-1")))
        if if_none_match is not None:
            headers.append((b"x-squall-if-none-match", if_none_match.encode("latin-1")))
        algorithm = body.facts.checksum_algorithm
        if algorithm is not None:
            headers.append((wire.CHECKSUM_ALGORITHM_HEADER.encode(), algorithm.encode()))
        data = await self._json("PUT", "object", {"bucket": bucket, "key": key},
                                headers=headers, content=body)
        assert isinstance(data, dict)
        return wire.info_from(data)

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._json("DELETE", "object", {"bucket": bucket, "key": key})

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        body = wire.dumps(wire.to_json(meta)).encode()
        data = await self._json("POST", "metadata", {"bucket": bucket, "key": key},
                                content=body)
        assert isinstance(data, dict)
        return wire.info_from(data)

    async def delete_objects(self, bucket: str, items: Sequence[DeleteItem]
                             ) -> list[DeleteAnswer]:
        """The member deletes ``items`` (keys it owns) as S3 DELETEs would, under its key
        locks, and answers each in order."""
        body = wire.dumps(wire.items_to_json(items)).encode()
        data = await self._json("POST", "delete-objects", {"bucket": bucket},
                                content=body)
        if not isinstance(data, list) or len(data) != len(items):
            raise ServiceUnavailable(f"cluster member {self.name} answered delete-objects "
                                     "with a malformed answer")
        return [wire.answer_from_json(answer) for answer in data]

    # -- mirrored write-back ------------------------------------------------------------
    async def mirror_put(self, bucket: str, key: str, *, epoch: int, seq: int,
                         info: ObjectInfo | None, body: AsyncIterator[bytes] | bytes,
                         handoff: bool = False) -> None:
        """The member keeps this copy durably (info None: a deletion) before answering.
        A mirror copy is refused unless this member owns the key in the member's view;
        a hand-off (``handoff``: the key's state for its new owner) is not."""
        params = {"bucket": bucket, "key": key, "epoch": str(epoch), "seq": str(seq)}
        if handoff:
            params["handoff"] = "1"
        headers = []
        if info is not None:
            headers.append((wire.INFO_HEADER.encode(), wire.dumps(wire.to_json(info)).encode()))
        await self._json("PUT", "mirror", params, headers=headers, content=body,
                         wait_continue=False)

    async def mirror_batch(self, copies: Sequence[wire.MirrorCopy]
                           ) -> list[StorageError | None]:
        """The member keeps these copies of small writes (as :meth:`mirror_put` each);
        what each got, in order (None: kept durably)."""
        data = await self._json("PUT", "mirror-batch", {}, content=wire.copies_to(copies))
        if not isinstance(data, list) or len(data) != len(copies):
            raise ServiceUnavailable(f"cluster member {self.name} answered mirror-batch "
                                     "with a malformed answer")
        return [None if answer is None else wire.error_from(answer) for answer in data]

    async def mirror_drop(self, items: Sequence[tuple[str, str, int, int]]) -> None:
        """The member drops its copies of these keys up to these (epoch, seq)."""
        body = wire.dumps([list(item) for item in items]).encode()
        await self._json("POST", "mirror-drop", {},
                         content=body)

    async def copies(self) -> list[tuple[str, str, int, int]]:
        """The mirror copies the member holds of this member's writes: (bucket, key,
        epoch, seq)."""
        data = await self._json("GET", "copies", {})
        if not isinstance(data, list):
            raise ServiceUnavailable(f"cluster member {self.name} answered copies with a "
                                     "malformed answer")
        return [(str(b), str(k), int(e), int(q)) for b, k, e, q in data]

    async def _stream(self, response: PeerResponse, byte_range: RangeRequest | None
                      ) -> ObjectStream:
        """The object a peer answered: its info header and its body (closed with it)."""
        try:
            info = wire.info_from(json.loads(response.header(wire.INFO_HEADER) or ""))
            resolved = None if byte_range is None else byte_range.resolve(info.size)
        except BaseException:
            await response.aclose()
            raise

        async def close(_exhausted: bool) -> None:
            await response.aclose()
        return ObjectStream(info, ClosingBody(self._transport.body(self.member, response),
                                              close), resolved)

    # -- listings and buckets ----------------------------------------------------------
    async def dirty(self, bucket: str, prefix: str, start_after: str, revision: int
                    ) -> Overlay:
        """The member's unflushed records under ``prefix`` after ``start_after``, sorted,
        taken once every hand-off of the view at ``revision`` has ended (RingChanged if
        the member has moved on to a newer view: list again)."""
        response = await self._call("GET", "dirty", {
            "bucket": bucket, "prefix": prefix, "start_after": start_after,
            "revision": str(revision)})
        overlay: Overlay = []
        pending = b""
        try:
            async for chunk in self._transport.body(self.member, response):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                overlay.extend(_record(line) for line in lines)
        finally:
            await response.aclose()
        if pending.strip():
            overlay.append(_record(pending))
        return overlay

    async def uploads(self, bucket: str, prefix: str) -> UploadsSnapshot:
        data = await self._json("GET", "uploads", {"bucket": bucket, "prefix": prefix})
        assert isinstance(data, dict)
        return UploadsSnapshot([wire.upload_from(u) for u in data["uploads"]],
                               frozenset(data["hidden_ids"]), frozenset(data["hidden_keys"]))

    async def drain_bucket(self, bucket: str) -> None:
        """BucketNotEmpty if the member holds live unflushed objects in ``bucket``;
        otherwise it aborts its uploads in progress there and returns once its pending
        deletions reached the backend."""
        await self._json("POST", "drain", {"bucket": bucket})

    async def forget_bucket(self, bucket: str) -> None:
        """The bucket was deleted: the member drops what it cached of it."""
        await self._json("POST", "forget", {"bucket": bucket})

    async def settings_changed(self, bucket: str) -> None:
        """The bucket's settings changed: the member drops its cached copy of them."""
        await self._json("POST", "settings", {"bucket": bucket})


def _query(params: dict[str, str]) -> bytes:
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote).encode()


def _record(line: bytes) -> tuple[str, ObjectInfo | None]:
    record = json.loads(line)
    info = record.get("info")
    return record["key"], wire.info_from(info) if info else None



class Peers:
    """The other members of the current view, as peer clients (made on first use)."""

    def __init__(self, transport: PeerTransport, membership: Membership) -> None:
        self._transport = transport
        self._membership = membership
        self._clients: dict[Member, PeerClient] = {}

    def _token(self) -> str:
        return self._membership.view.token

    def get(self, name: str) -> PeerClient:
        """The client of member ``name``; MemberUnavailable if it left the view."""
        member = self._membership.view.members.get(name)
        if member is None:
            raise MemberUnavailable(name, "no longer a member")
        client = self._clients.get(member)
        if client is None:
            client = self._clients[member] = PeerClient(self._transport, member, self._token)
        return client

    def others(self) -> list[PeerClient]:
        """Every other member of the current view."""
        return [self.get(name) for name in self._membership.view.others()]
