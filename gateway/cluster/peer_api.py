"""The serving side of the peer protocol: ``/_squall/peer/*``, HMAC-authenticated.

Object operations run for keys this member owns in its view, once it has caught up with
the view the caller signed under (a caller with an older view is told ``ViewChanged``);
listings export what this member holds unflushed at a quiescent view. Errors travel as
JSON in the ``x-squall-error`` header with their status.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from backends.core.base import Backend, RangeRequest, bare
from backends.core.errors import (
    BucketNotEmpty,
    IncompleteBody,
    ServiceUnavailable,
    StorageError,
)
from backends.core.numbers import natural
from gateway.cache.cluster_view import ClusterView
from gateway.cluster import wire
from gateway.cluster.bodyseal import unseal
from gateway.cluster.errors import PeerAuthFailed, ViewChanged
from gateway.cluster.keyops import MAX_DELETE_ITEMS, DeleteAnswer, KeyOperations
from gateway.cluster.peerauth import HEADER, Marker, PeerAuth
from gateway.cluster.replication import Replication
from gateway.cluster.view import Membership, View
from gateway.protocol.checksumming import ChecksummingBody
from gateway.protocol.errors import InternalError, InvalidArgument, s3_error_for
from gateway.protocol.responses import ObjectStreamResponse

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


def _not_owner(view: View, sender: str, bucket: str, key: str) -> ViewChanged:
    """A copy refused: ``sender`` does not own the key in this member's view."""
    return ViewChanged(f"{sender} does not own {bucket}/{key} in the view of {view.me} "
                       f"(revision {view.revision})", revision=view.revision)


async def _whole(data: bytes) -> AsyncIterator[bytes]:
    yield data


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

    def __init__(self, local: Backend, cache: ClusterView | None, membership: Membership,
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
        self._membership = membership
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
            ("PUT", "mirror-batch"): self.mirror_batch,
            ("POST", "mirror-drop"): self.mirror_drop,
            ("GET", "copies"): self.copies,
        }

    def _sender(self, request: Request) -> str:
        """The name of the member that sent ``request`` (in this member's view: it is a
        member once this member has caught up with the sender's view)."""
        marker: Marker = request.scope[_SENDER]
        name = self._membership.view.name_of(marker.sender)
        if name is None:
            raise ServiceUnavailable("a peer request from a member that is not in this "
                                     "member's view of the cluster")
        return name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            marker = request.headers.get(HEADER)
            if marker is None:
                raise PeerAuthFailed("Peer endpoints need the cluster peer signature.")
            sender = self._auth.verify(scope["method"], scope.get("raw_path") or b"",
                                       scope["query_string"], marker)
            await self._membership.catch_up(sender.view)
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
        self._check_owner(bucket, key)
        return bucket, key

    def _check_owner(self, bucket: str, key: str) -> None:
        view = self._membership.view
        if not view.owns(bucket, key):
            raise ViewChanged(f"cluster member {view.me} does not own {bucket}/{key} in "
                              f"its view (revision {view.revision})",
                              revision=view.revision)

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
            raise ServiceUnavailable(f"cluster member {self._membership.view.me} is starting")
        try:
            items = wire.items_from_json(json.loads(await _bounded_body(request,
                                                                        MAX_DELETE_BODY)))
        except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError too
            raise InvalidArgument(f"malformed delete-objects request: {exc}") from None
        answers: list[DeleteAnswer] = []
        for key, version_id in items:
            try:
                self._check_owner(bucket, key)
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
            raise InvalidArgument(f"cluster member {self._membership.view.me} keeps no "
                                  "mirror copies (no coordinator)")
        return self._replication

    def _keeping_copies(self) -> Replication:
        """The replication of a member that still keeps copies (it has not left)."""
        replication = self._mirroring()
        if replication.membership.left:
            raise ServiceUnavailable(f"cluster member {self._membership.view.me} has left "
                                     "the cluster: it keeps no more copies")
        return replication

    async def mirror_put(self, request: Request) -> Response:
        """Keep a copy of another member's unflushed write (only if it owns the key in
        this member's view), or a state of a key handed over to this member by a member
        of its view; durably, then answer."""
        replication = self._keeping_copies()
        sender = self._sender(request)
        bucket, key = _param(request, "bucket"), _param(request, "key")
        epoch, seq = _int_param(request, "epoch"), _int_param(request, "seq")
        if epoch is None or seq is None:
            raise InvalidArgument("mirror copy without a valid epoch and seq")
        view = self._membership.view
        if request.query_params.get("handoff") != "1" and view.owner(bucket, key) != sender:
            raise _not_owner(view, sender, bucket, key)
        raw = request.headers.get(wire.INFO_HEADER)
        info = wire.info_from(json.loads(raw)) if raw else None
        await replication.store.put(bucket, key, owner=sender, epoch=epoch, seq=seq,
                                    info=info, body=request_body(request.receive))
        return _json_response(None)

    async def mirror_batch(self, request: Request) -> Response:
        """Keep the copies of several small writes the sender owns (``PUT mirror`` for
        each, sent together: :mod:`gateway.cluster.mirror_batches`), the concurrent ones
        in one group commit; answers each in order (null, or the error it got)."""
        replication = self._keeping_copies()
        sender = self._sender(request)
        try:
            copies = wire.copies_from(await _bounded_body(request, wire.MAX_BATCH_BYTES))
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidArgument(f"malformed mirror-batch request: {exc}") from None
        view = self._membership.view

        async def keep(copy: wire.MirrorCopy) -> None:
            if view.owner(copy.bucket, copy.key) != sender:
                raise _not_owner(view, sender, copy.bucket, copy.key)
            await replication.store.put(copy.bucket, copy.key, owner=sender,
                                        epoch=copy.epoch, seq=copy.seq, info=copy.info,
                                        body=_whole(copy.body))

        results = await asyncio.gather(*(keep(c) for c in copies), return_exceptions=True)
        answers: list[object] = []
        for result in results:
            if isinstance(result, StorageError):
                answers.append(wire.error_to(result))
            elif isinstance(result, BaseException):
                log.error("keeping a mirror copy for %s failed", sender, exc_info=result)
                answers.append(wire.error_to(InternalError()))
            else:
                answers.append(None)
        return _json_response(answers)

    async def mirror_drop(self, request: Request) -> Response:
        replication = self._mirroring()
        try:
            data = json.loads(await _bounded_body(request, 64 << 20))
            items = [(str(b), str(k), int(e), int(q)) for b, k, e, q in data]
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"malformed mirror-drop request: {exc}") from None
        return _json_response(await replication.store.drop(items))

    async def copies(self, request: Request) -> Response:
        """The copies held here of the sender's writes (it has started again)."""
        return _json_response(self._mirroring().copies_of(self._sender(request)))

    # -- listings and buckets ----------------------------------------------------------
    async def dirty(self, request: Request) -> Response:
        """NDJSON, sorted by key: this member's unflushed records of its keys in the
        range (the states handed over to it included), taken now (before the caller
        reads the backend) at the caller's view once its hand-overs have ended;
        ViewChanged if this member has moved on (see docs/cluster.md, "Listings")."""
        bucket = _param(request, "bucket")
        prefix = request.query_params.get("prefix", "")
        after = request.query_params.get("start_after", "")
        wanted = _int_param(request, "revision") or 0
        revision = await self._membership.quiescent(wanted)
        view = self._membership.view
        if revision != wanted or view.revision != wanted:
            raise ViewChanged(f"cluster member {view.me} lists at revision {view.revision}",
                              revision=view.revision)
        snapshot = [(e.key, None if e.deleted else e.info())
                    for e in self._cache.dirty_snapshot(bucket, prefix, after)
                    if view.owns(bucket, e.key)] if self._cache is not None else []
        if self._replication is not None:  # states handed over, not adopted yet
            handed = self._replication.unadopted(bucket, prefix, after)
            if handed:
                snapshot = sorted(snapshot + handed, key=lambda pair: pair[0])

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
