"""The serving side of the peer protocol: ``/_squall/peer/*``, HMAC-authenticated.

Object operations run on this node's own storage stack (the cache tier, or the backend
without one) and only for keys this node owns; listings export what this node holds
unflushed. Errors travel as JSON in the ``x-squall-error`` header with their status.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from backends.base import Backend, RangeRequest, bare
from backends.errors import (
    BucketNotEmpty,
    IncompleteBody,
    NoSuchKey,
    ServiceUnavailable,
    StorageError,
)
from backends.numbers import natural
from gateway.cache.cluster_view import ClusterView
from gateway.checksumming import ChecksummingBody
from gateway.cluster import wire
from gateway.cluster.bodyseal import unseal
from gateway.cluster.errors import PeerAuthFailed
from gateway.cluster.keyops import MAX_DELETE_ITEMS, DeleteAnswer, KeyOperations
from gateway.cluster.peerauth import HEADER, PeerAuth
from gateway.cluster.placement import Placement
from gateway.cluster.replication import Replication
from gateway.s3api.errors import InternalError, InvalidArgument, s3_error_for
from gateway.s3api.responses import ObjectStreamResponse

log = logging.getLogger("squall.cluster")
PATH_PREFIX = "/_squall/peer/"
_SENDER = "squall.peer_sender"
# A delete-objects request: at most 1000 keys of 1 KiB, each at most tripled by JSON.
MAX_DELETE_BODY = MAX_DELETE_ITEMS * 4 * 1024

Handler = Callable[[Request], Awaitable[Response]]


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None:
        raise InvalidArgument(f"peer request without {name!r}")
    return value


def _int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    number = natural(value)
    if number is None:
        raise InvalidArgument(f"peer request with a bad {name!r}")
    return number


def _json_response(value: object, status: int = 200) -> Response:
    return Response(wire.dumps(value), status_code=status, media_type="application/json")


async def request_body(receive: Receive) -> AsyncIterator[bytes]:
    """An ASGI request body as it arrives; IncompleteBody if the sender goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise IncompleteBody("The client closed the connection before sending the "
                                 "whole body.")
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


async def _bounded_body(request: Request, limit: int) -> bytes:
    """The whole request body; InvalidArgument past ``limit`` bytes."""
    data = bytearray()
    async for chunk in request_body(request.receive):
        data += chunk
        if len(data) > limit:
            raise InvalidArgument(f"peer request body over {limit} bytes")
    return bytes(data)


class PeerAPI:
    """ASGI app for ``/_squall/peer/*``.

    ``local`` is this node's storage under the cluster layer; ``cache`` the cluster's view
    of its cache tier (None without one); ``forget_bucket`` is told when another member
    deleted a bucket; ``key_operations`` gives what runs other members' requests for the
    keys this node owns (None until the gateway core is built).
    """

    def __init__(self, local: Backend, cache: ClusterView | None, ring: Placement,
                 auth: PeerAuth,
                 forget_bucket: Callable[[str], None],
                 settings_changed: Callable[[str], None],
                 key_operations: Callable[[], KeyOperations | None] = lambda: None,
                 replication: Replication | None = None,
                 objects: Backend | None = None) -> None:
        self._local = local
        # object calls for keys this node serves: through the cluster layer when it
        # mirrors writes (objects), else the local stack
        self._objects = objects if objects is not None else local
        self._replication = replication
        self._cache = cache
        self._ring = ring
        self._auth = auth
        self._forget = forget_bucket
        self._settings_changed = settings_changed
        self._key_operations = key_operations
        self._routes: dict[tuple[str, str], Handler] = {
            ("GET", "object"): self.get_object,
            ("HEAD", "object"): self.head_object,
            ("PUT", "object"): self.put_object,
            ("DELETE", "object"): self.delete_object,
            ("POST", "metadata"): self.replace_metadata,
            ("POST", "delete-objects"): self.delete_objects,
            ("GET", "dirty"): self.dirty,
            ("GET", "uploads"): self.uploads,
            ("POST", "drain"): self.drain,
            ("POST", "forget"): self.forget,
            ("POST", "settings"): self.settings,
            ("PUT", "mirror"): self.mirror_put,
            ("POST", "mirror-drop"): self.mirror_drop,
            ("POST", "claim"): self.claim,
            ("GET", "held"): self.held,
            ("POST", "release"): self.release,
        }

    def add_route(self, method: str, operation: str,
                  handler: Callable[[Request], Awaitable[Response]]) -> None:
        """Serve ``/_squall/peer/<operation>`` with ``handler`` (signed like the others)."""
        self._routes[(method, operation)] = handler

    def sender(self, request: Request) -> int:
        """The node id of the member that sent ``request``."""
        return int(request.scope[_SENDER])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            marker = request.headers.get(HEADER)
            if marker is None:
                raise PeerAuthFailed("Peer endpoints need the cluster peer signature.")
            sender = self._auth.verify(scope["method"], scope.get("raw_path") or b"",
                                       scope["query_string"], marker)
            request = Request(*unseal({**scope, _SENDER: sender}, receive,
                                      self._auth.body_key(marker)))
            handler = self._routes.get((scope["method"], scope["path"][len(PATH_PREFIX):]))
            if handler is None:
                raise InvalidArgument(f"no peer operation {scope['method']} {scope['path']}")
            response = await handler(request)
        except Exception as exc:
            if not isinstance(exc, StorageError):
                log.exception("peer request %s %s failed", scope["method"], scope["path"])
                exc = InternalError()
            spec, _ = s3_error_for(exc)
            response = Response(b"", status_code=spec.status,
                                headers={wire.ERROR_HEADER: wire.dumps(wire.error_to(exc))})
        await response(scope, receive, send)

    def _owned(self, request: Request) -> tuple[str, str]:
        bucket, key = _param(request, "bucket"), _param(request, "key")
        if not self._ring.owns(bucket, key):
            raise ServiceUnavailable(f"cluster member {self._ring.self_index} does not own "
                                     f"{bucket}/{key}")
        return bucket, key

    # -- objects -----------------------------------------------------------------------
    async def head_object(self, request: Request) -> Response:
        info = await self._objects.head_object(*self._owned(request))
        return Response(b"", headers={wire.INFO_HEADER: wire.dumps(wire.to_json(info))})

    async def get_object(self, request: Request) -> Response:
        bucket, key = self._owned(request)
        first, last, suffix = (_int_param(request, n) for n in ("first", "last", "suffix"))
        byte_range = None
        if first is not None or last is not None or suffix is not None:
            byte_range = RangeRequest(first, last, suffix)
        stream = await self._objects.get_object(bucket, key, byte_range=byte_range)
        return ObjectStreamResponse(stream, status=200, headers={
            wire.INFO_HEADER: wire.dumps(wire.to_json(stream.info))})

    async def put_object(self, request: Request) -> Response:
        bucket, key = self._owned(request)
        meta = wire.meta_from(json.loads(request.headers.get("x-squall-meta") or "{}"))
        md5 = request.headers.get("x-squall-md5")
        algorithm = request.headers.get(wire.CHECKSUM_ALGORITHM_HEADER)
        raw = request_body(request.receive)
        # The checksum the sender's body verified is computed again from the bytes here.
        body = bare(raw) if algorithm is None else ChecksummingBody(raw, algorithm)
        info = await self._objects.put_object(
            bucket, key, body, meta=meta,
            content_md5=bytes.fromhex(md5) if md5 else None,
            if_match=request.headers.get("x-squall-if-match"),
            if_none_match=request.headers.get("x-squall-if-none-match"))
        return _json_response(wire.to_json(info))

    async def delete_object(self, request: Request) -> Response:
        await self._objects.delete_object(*self._owned(request))
        return _json_response(None)

    async def replace_metadata(self, request: Request) -> Response:
        bucket, key = self._owned(request)
        meta = wire.meta_from(json.loads(await request.body()))
        info = await self._objects.replace_metadata(bucket, key, meta)
        return _json_response(wire.to_json(info))

    async def delete_objects(self, request: Request) -> Response:
        """Part of a DeleteObjects another member received: each key (this node's) is
        deleted as an S3 DELETE would, under its lock here; one answer per key, in order."""
        bucket = _param(request, "bucket")
        operations = self._key_operations()
        if operations is None:
            raise ServiceUnavailable(f"cluster member {self._ring.self_index} is starting")
        try:
            items = wire.items_from_json(json.loads(await _bounded_body(request,
                                                                        MAX_DELETE_BODY)))
        except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError too
            raise InvalidArgument(f"malformed delete-objects request: {exc}") from None
        answers: list[DeleteAnswer] = []
        for key, version_id in items:
            try:
                if not self._ring.owns(bucket, key):
                    raise ServiceUnavailable(f"cluster member {self._ring.self_index} does "
                                             f"not own {bucket}/{key}")
                answers.append(await operations.delete_object(bucket, key,
                                                              version_id=version_id))
            except StorageError as exc:
                answers.append(exc)
            except Exception:
                log.exception("deleting %s/%r for another member failed", bucket, key)
                answers.append(InternalError())
        return _json_response([wire.answer_to_json(a) for a in answers])

    # -- mirrored write-back (gateway/cluster/replication.py) ---------------------------
    def _mirroring(self) -> Replication:
        if self._replication is None:
            raise InvalidArgument(f"cluster member {self._ring.self_index} does not keep "
                                  "mirror copies (--dirty-replicas 1)")
        return self._replication

    async def mirror_put(self, request: Request) -> Response:
        """Keep a copy of another member's unflushed write, durably, then answer."""
        replication = self._mirroring()
        bucket, key = _param(request, "bucket"), _param(request, "key")
        owner, epoch, seq = (_int_param(request, n) for n in ("owner", "epoch", "seq"))
        if owner is None or epoch is None or seq is None \
                or owner >= len(self._ring.members):
            raise InvalidArgument("mirror copy without a valid owner, epoch and seq")
        raw = request.headers.get(wire.INFO_HEADER)
        info = wire.info_from(json.loads(raw)) if raw else None
        await replication.store.raise_epoch(owner, epoch)
        await replication.store.put(bucket, key, owner=owner, epoch=epoch, seq=seq,
                                    info=info, body=request_body(request.receive))
        return _json_response(None)

    async def mirror_drop(self, request: Request) -> Response:
        replication = self._mirroring()
        try:
            data = json.loads(await _bounded_body(request, 64 << 20))
            items = [(str(b), str(k), int(e), int(q)) for b, k, e, q in data]
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"malformed mirror-drop request: {exc}") from None
        return _json_response(await replication.store.drop(items))

    async def claim(self, request: Request) -> Response:
        answer = await self._mirroring().answer_claim(request.scope[_SENDER])
        return _json_response(answer.to_json())

    async def held(self, request: Request) -> Response:
        replication = self._mirroring()
        bucket, key = _param(request, "bucket"), _param(request, "key")
        if request.query_params.get("source") == "mirror":
            record = replication.store.records.get((bucket, key))
            if record is None or record.info is None:
                raise NoSuchKey(bucket, key)
            return StreamingResponse(replication.store.read(record), headers={
                wire.INFO_HEADER: wire.dumps(wire.to_json(record.info))})
        stream = await self._local.get_object(bucket, key)
        return ObjectStreamResponse(stream, status=200, headers={
            wire.INFO_HEADER: wire.dumps(wire.to_json(stream.info))})

    async def release(self, request: Request) -> Response:
        replication = self._mirroring()
        try:
            keys = [(str(b), str(k)) for b, k in json.loads(
                await _bounded_body(request, 64 << 20))]
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"malformed release request: {exc}") from None
        await replication.release(request.scope[_SENDER], keys)
        return _json_response(None)

    # -- listings and buckets ----------------------------------------------------------
    async def dirty(self, request: Request) -> Response:
        """NDJSON, sorted by key: this node's unflushed records in the range, taken now
        (before the caller reads the backend; see docs/cluster.md)."""
        bucket = _param(request, "bucket")
        prefix = request.query_params.get("prefix", "")
        after = request.query_params.get("start_after", "")
        snapshot = [(e.key, None if e.deleted else e.info())
                    for e in self._cache.dirty_snapshot(bucket, prefix, after)] \
            if self._cache is not None else []
        if self._replication is not None:  # copies of keys whose owner is down
            copies = self._replication.down_copies(bucket, prefix, after)
            if copies:
                held = {key for key, _ in snapshot}
                snapshot = sorted(snapshot + [c for c in copies if c[0] not in held],
                                  key=lambda pair: pair[0])

        async def lines() -> AsyncIterator[bytes]:
            batch: list[str] = []
            for key, found in snapshot:
                info = None if found is None else wire.to_json(found)
                batch.append(wire.dumps({"key": key, "info": info}))
                if len(batch) >= 256:
                    yield ("\n".join(batch) + "\n").encode()
                    batch = []
            if batch:
                yield ("\n".join(batch) + "\n").encode()
        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def uploads(self, request: Request) -> Response:
        bucket = _param(request, "bucket")
        prefix = request.query_params.get("prefix", "")
        if self._cache is None:
            return _json_response({"uploads": [], "hidden_ids": [], "hidden_keys": []})
        held = self._cache.uploads(bucket, prefix)
        return _json_response({"uploads": [wire.to_json(u) for u in held.uploads],
                               "hidden_ids": held.hidden_ids, "hidden_keys": held.hidden_keys})

    async def drain(self, request: Request) -> Response:
        bucket = _param(request, "bucket")
        if self._cache is not None:
            if self._cache.holds_objects(bucket):
                raise BucketNotEmpty(bucket)
            await self._cache.abort_uploads(bucket)
            self._cache.expedite_deletes(bucket)
            await self._cache.drain_bucket(bucket)
        return _json_response(None)

    async def forget(self, request: Request) -> Response:
        bucket = _param(request, "bucket")
        self._forget(bucket)
        if self._cache is not None:
            await self._cache.drop_clean(bucket)
        return _json_response(None)

    async def settings(self, request: Request) -> Response:
        self._settings_changed(_param(request, "bucket"))
        return _json_response(None)
