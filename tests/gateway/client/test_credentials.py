"""The one credentials lookup of every client: the SQUALL_* pair first, else the AWS_* one."""

from __future__ import annotations

import pickle

import pytest

from gateway.client.credentials import Credentials, MissingCredentials, credentials_from_env

BOTH = {"SQUALL_ACCESS_KEY": "sq", "SQUALL_SECRET_KEY": "sqs",
        "AWS_ACCESS_KEY_ID": "aws", "AWS_SECRET_ACCESS_KEY": "awss",
        "AWS_SESSION_TOKEN": "tok"}


def test_the_squall_pair_comes_first() -> None:
    assert credentials_from_env(BOTH) == Credentials("sq", "sqs")  # no AWS session token


def test_else_the_aws_pair_with_its_session_token() -> None:
    only_aws = {k: v for k, v in BOTH.items() if k.startswith("AWS")}
    assert credentials_from_env(only_aws) == Credentials("aws", "awss", "tok")
    del only_aws["AWS_SESSION_TOKEN"]
    assert credentials_from_env(only_aws).token is None


def test_half_a_pair_is_no_credentials() -> None:
    with pytest.raises(MissingCredentials, match="no credentials: set SQUALL_ACCESS_KEY"):
        credentials_from_env({"SQUALL_ACCESS_KEY": "half", "AWS_SECRET_ACCESS_KEY": "x"})
    assert issubclass(MissingCredentials, ValueError)  # bad input: exit status 2


def test_the_secret_stays_out_of_reprs_and_travels_to_processes() -> None:
    creds = Credentials("AK", "the-secret", "the-token")
    assert "the-secret" not in repr(creds) and "the-token" not in repr(creds)
    assert pickle.loads(pickle.dumps(creds)) == creds
