"""The forwarding base of backend wrappers: the conformance suite through a wrapper that
changes nothing, and the capabilities a wrapper claims."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.core.base import (
    Backend,
    CopyingBackend,
    MultipartBackend,
    ObjectMeta,
    PartCopyingBackend,
)
from backends.core.delegating import (
    DelegatingBackend,
    DelegatingCopying,
    DelegatingMultipart,
    DelegatingPartCopying,
)
from backends.core.errors import NotImplementedByBackend
from backends.posix import PosixBackend
from tests.backends.conformance import BackendConformance


class Everything(DelegatingMultipart, DelegatingCopying, DelegatingPartCopying):
    """A wrapper that changes nothing and offers every capability it forwards."""


class TestDelegatingConformance(BackendConformance):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[Everything]:
        wrapper = Everything(PosixBackend(tmp_path / "backend",
                                          min_part_size=self.min_part_size))
        yield wrapper
        await wrapper.aclose()


def test_a_wrapper_claims_only_the_capabilities_it_mixes_in(tmp_path: Path) -> None:
    inner = PosixBackend(tmp_path)
    capabilities = (MultipartBackend, CopyingBackend, PartCopyingBackend)

    def claimed(wrapper: object) -> list[bool]:
        return [isinstance(wrapper, c) for c in capabilities]

    plain = DelegatingBackend(inner)
    assert isinstance(plain, Backend) and plain.inner is inner
    assert claimed(plain) == [False, False, False]
    assert claimed(DelegatingMultipart(inner)) == [True, False, False]
    assert claimed(Everything(inner)) == [True, True, True]


async def test_a_capability_the_wrapped_backend_lacks_is_not_implemented(
        tmp_path: Path) -> None:
    wrapper = Everything(DelegatingBackend(PosixBackend(tmp_path)))  # a plain Backend
    with pytest.raises(NotImplementedByBackend):
        await wrapper.create_multipart_upload("b", "k", meta=ObjectMeta())
    with pytest.raises(NotImplementedByBackend):
        await wrapper.copy_object("b", "k", "b", "k2", meta=ObjectMeta())
    with pytest.raises(NotImplementedByBackend):
        await wrapper.upload_part_copy("b", "k", "b", "k2", "u", 1)
    with pytest.raises(NotImplementedByBackend):
        wrapper.iter_multipart_uploads("b")
