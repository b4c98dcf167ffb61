"""SCRAM credentials (KIP-554): stored, described, and refused with KRaft's errors."""

from __future__ import annotations

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from tests.server.conftest import RawClient, scenario


def test_scram_credentials_are_stored_described_and_refused_as_kafka_refuses_them(serve):
    raw = RawClient(serve(scenario(brokers=1, topics='name = "t"')).port(0))
    up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    down = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    alter = AlterUserScramCredentialsRequest(
        deletions=[down(name="ghost", mechanism=1)],
        upsertions=[
            up(name="alice", mechanism=1, iterations=8192, salt=b"s", salted_password=b"p"),
            up(name="bob", mechanism=3, iterations=8192, salt=b"s", salted_password=b"p"),
            up(name="carol", mechanism=2, iterations=100, salt=b"s", salted_password=b"p"),
        ],
    )
    answer = raw.request(alter, AlterUserScramCredentialsResponse, 0)
    assert {r.user: r.error_code for r in answer.results} == {"ghost": 91, "alice": 0, "bob": 93, "carol": 94}
    users = DescribeUserScramCredentialsRequest.UserName
    described = raw.request(
        DescribeUserScramCredentialsRequest(users=[users(name="alice"), users(name="bob")]),
        DescribeUserScramCredentialsResponse,
        0,
    )
    assert [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in described.results
    ] == [
        ("alice", 0, [(1, 8192)]),
        ("bob", 91, []),
    ]
    raw.close()
