"""The operation -> action table covers every routed operation with AWS's names."""

from __future__ import annotations

import re

from gateway.auth.actions import ACTIONS, Scope
from gateway.s3api.handlers.acl import HANDLERS as ACL_HANDLERS
from gateway.s3api.routing import _VARIANTS, ROUTES


def test_every_routed_operation_has_an_action() -> None:
    routed = set(ROUTES.values()) | set(_VARIANTS.values()) | {"PreflightRequest"}
    missing = routed - set(ACTIONS)
    assert not missing, f"operations without an entry in gateway/auth/actions.py: {missing}"
    assert set(ACL_HANDLERS) <= set(ACTIONS)


def test_action_names_are_s3_actions() -> None:
    for operation, action in ACTIONS.items():
        if action.scope is Scope.SERVICE and operation == "PreflightRequest":
            continue
        assert re.fullmatch(r"s3:[A-Z][A-Za-z]+", action.name), operation
        assert action.versioned is None or re.fullmatch(r"s3:[A-Z][A-Za-z]+Version[A-Za-z]*",
                                                        action.versioned), operation


def test_versioned_requests_name_the_version_actions() -> None:
    assert ACTIONS["GetObject"].action_for({"versionId": "v1"}) == "s3:GetObjectVersion"
    assert ACTIONS["GetObject"].action_for({}) == "s3:GetObject"
    assert ACTIONS["DeleteObject"].action_for({"versionId": "v"}) == "s3:DeleteObjectVersion"
    assert ACTIONS["PutObjectAcl"].action_for({"versionId": "v"}) == "s3:PutObjectVersionAcl"
    assert ACTIONS["ListObjectsV2"].action_for({"versionId": "v"}) == "s3:ListBucket"
