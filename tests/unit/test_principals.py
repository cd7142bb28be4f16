"""The principals directory: keys checked when loaded, looked up at signing time."""

from __future__ import annotations

from datetime import UTC, datetime

import nkeys
import pytest

from contracts.shared.roles import Role
from contracts.trust.keys import BadKey, new_user_seed, public_of_seed, raw_public_key, verify
from contracts.trust.principals import (
    Directory,
    KeyRefused,
    Principal,
    PrincipalKey,
    load_directory,
    render_directory,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 6, 1, tzinfo=UTC)


def _key() -> str:
    return public_of_seed(new_user_seed())


def test_a_signature_verifies_only_for_its_key_and_message() -> None:
    seed = new_user_seed()
    signature = nkeys.from_seed(bytearray(seed)).sign(b"payload")
    assert verify(public_of_seed(seed), b"payload", signature)
    assert not verify(public_of_seed(seed), b"payloaD", signature)
    assert not verify(_key(), b"payload", signature)
    assert not verify("UNOTAKEY", b"payload", signature)


def test_a_mistyped_key_is_refused_when_loaded() -> None:
    key = _key()
    typo = key[:-1] + ("A" if key[-1] != "A" else "B")
    with pytest.raises(BadKey, match="checksum"):
        raw_public_key(typo)
    with pytest.raises(ValueError, match=r"principal #1\.keys\.0\.public: .*checksum"):
        load_directory(f'[[principal]]\nname = "a"\nrole = "agent"\n'
                       f'keys = [{{ public = "{typo}" }}]\n')


def test_names_and_keys_are_unique() -> None:
    key = _key()
    one = Principal(name="a", role=Role.AGENT, keys=(PrincipalKey(public=key),))
    with pytest.raises(ValueError, match="names must be unique"):
        Directory(principals=(one, one))
    other = Principal(name="b", role=Role.AGENT, keys=(PrincipalKey(public=key),))
    with pytest.raises(ValueError, match="keys must be unique"):
        Directory(principals=(one, other))


def test_a_key_vouches_only_inside_its_window() -> None:
    old, new = _key(), _key()
    directory = Directory(principals=(Principal(
        name="billing-agent", role=Role.AGENT,
        keys=(PrincipalKey(public=old, revoked_at=T1), PrincipalKey(public=new, valid_from=T1)),
    ),))
    found = directory.lookup(old, T0)
    assert isinstance(found, Principal) and found.name == "billing-agent"
    refused = directory.lookup(old, T1)
    assert isinstance(refused, KeyRefused) and refused.rule == "key_revoked"
    assert isinstance(directory.lookup(new, T0), KeyRefused)
    assert isinstance(directory.lookup(new, T1), Principal)
    unknown = directory.lookup(_key(), T0)
    assert isinstance(unknown, KeyRefused) and unknown.rule == "unknown_key"


def test_operator_scope() -> None:
    key = PrincipalKey(public=_key())
    alice = Principal(name="alice", role=Role.OPERATOR, keys=(key,), projects=("billing",))
    assert alice.covers_project("billing")
    assert not alice.covers_project("search")
    assert not alice.covers_project(None)
    root = Principal(name="root", role=Role.OPERATOR, keys=(PrincipalKey(public=_key()),),
                     projects=("*",))
    assert root.covers_project(None) and root.covers_project("search")


def test_a_rendered_directory_loads_back_the_same() -> None:
    directory = Directory(principals=(
        Principal(name="alice", role=Role.OPERATOR, projects=("*",),
                  keys=(PrincipalKey(public=_key(), valid_from=T0, revoked_at=T1),)),
        Principal(name="pager", role=Role.SUBSCRIBER, consumers=("pager-applied",),
                  keys=(PrincipalKey(public=_key()),)),
    ))
    assert load_directory(render_directory(directory.principals)) == directory


@pytest.mark.parametrize("name", ["Alice", "a.b", "a*", "a>", "", "x" * 41])
def test_a_name_that_cannot_be_a_subject_token_is_refused(name: str) -> None:
    with pytest.raises(ValueError):
        load_directory(f'[[principal]]\nname = "{name}"\nrole = "agent"\n'
                       f'keys = [{{ public = "{_key()}" }}]\n')
