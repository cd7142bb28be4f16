"""Webhook rules (pure): which URLs and addresses, which events, how a delivery ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.shared.ids import new_id
from contracts.webhooks.delivery import DeliveryOver, after_attempt
from contracts.webhooks.matching import check_patterns, matches
from contracts.webhooks.model import Attempt, Delivery, DeliveryStatus
from contracts.webhooks.policy import (
    Allowlist,
    RefusedUrl,
    WebhookLimits,
    address_allowed,
    check_url,
    next_delay,
)
from services.webhook_secrets import PLAIN, SEALED, Sealer, SecretUnavailable, new_secret

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIMITS = WebhookLimits(max_attempts=3, backoff=(1.0, 10.0), max_age_seconds=60.0)


@pytest.mark.parametrize("url", ["ftp://h/x", "file:///etc/passwd", "javascript:alert(1)",
                                 "http://", "http://u:p@h/", "http://u@h/", "h/x",
                                 "http://h:0/", "http://h/ x", "http://h:99999/",
                                 "https://" + "a" * 3000])
def test_refused_urls(url: str) -> None:
    with pytest.raises(RefusedUrl):
        check_url(url)


def test_accepted_urls() -> None:
    for url in ("https://hooks.example.com/x?token=1", "http://127.0.0.1:8080/hook",
                "https://[::1]/x"):
        assert check_url(url) == url


@pytest.mark.parametrize(("address", "public"), [
    ("127.0.0.1", False), ("10.1.2.3", False), ("192.168.0.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("::1", False), ("fe80::1", False),
    ("0.0.0.0", False), ("224.0.0.1", False), ("fd00::1", False), ("not-an-ip", False),
    ("8.8.8.8", True), ("2001:4860:4860::8888", True)])
def test_without_an_allowlist_only_public_addresses(address: str, public: bool) -> None:
    assert address_allowed("h", address, Allowlist()) is public


def test_an_allowlist_names_networks_and_hosts_and_nothing_else() -> None:
    allow = Allowlist.parse("127.0.0.0/8, hooks.example.com,*.corp.example,::1")
    assert address_allowed("x", "127.0.0.5", allow)
    assert address_allowed("x", "::1", allow)
    assert address_allowed("hooks.example.com", "10.0.0.1", allow)
    assert address_allowed("a.b.corp.example", "10.0.0.1", allow)
    assert not address_allowed("corp.example.evil", "10.0.0.1", allow)
    assert not address_allowed("x", "8.8.8.8", allow)  # the list replaces "public"
    with pytest.raises(ValueError, match="neither"):
        Allowlist.parse("bad host!")


def test_patterns() -> None:
    assert check_patterns(["correction.*", "correction.*", "*"]) == ["correction.*", "*"]
    for bad in ([], ["Correction"], ["a..b"], ["webhook.added"], ["x"] * 40, ["a.*.b"]):
        with pytest.raises(ValueError):
            check_patterns(bad)
    t = "io.decision-ledger.correction.applied.v1"
    assert matches(["correction.*"], t) and matches(["*"], t)
    assert matches(["correction.applied"], t) and not matches(["correction.failed"], t)
    assert not matches(["corr*"], t) and not matches(["*"], "other.type.v1")
    assert not matches(["*"], "io.decision-ledger.webhook.delivery.delivered.v1")


def _delivery() -> Delivery:
    return Delivery(delivery_id="w:e", webhook_id=new_id(), event_id="e", event_type="t",
                    subject="s", created_at=T0, next_at=T0)


def _attempt(seconds: float, status: int | None) -> Attempt:
    return Attempt(at=T0 + timedelta(seconds=seconds), status_code=status,
                   error=None if status == 200 else "x", seconds=0.1)


def test_a_delivery_is_retried_with_backoff_then_dead_lettered() -> None:
    d = after_attempt(_delivery(), _attempt(0, 500), LIMITS)
    assert (d.status, d.next_at) == (DeliveryStatus.PENDING, T0 + timedelta(seconds=1))
    d = after_attempt(d, _attempt(1, None), LIMITS)
    assert d.next_at == T0 + timedelta(seconds=11)
    d = after_attempt(d, _attempt(11, 503), LIMITS)
    assert d.status is DeliveryStatus.DEAD_LETTERED and len(d.attempts) == 3
    with pytest.raises(DeliveryOver):
        after_attempt(d, _attempt(12, 200), LIMITS)


def test_a_delivery_ends_delivered_or_when_its_time_or_retries_run_out() -> None:
    assert after_attempt(_delivery(), _attempt(0, 204), LIMITS).status \
        is DeliveryStatus.DELIVERED
    late = after_attempt(_delivery(), _attempt(55, 500), LIMITS)  # 55 + 1 < 60: retried
    assert late.status is DeliveryStatus.PENDING
    later = after_attempt(late, _attempt(56, 500), LIMITS)  # 56 + 10 > 60: no time left
    assert later.status is DeliveryStatus.DEAD_LETTERED
    never = after_attempt(_delivery(), _attempt(0, None), LIMITS, retryable=False)
    assert never.status is DeliveryStatus.DEAD_LETTERED and len(never.attempts) == 1
    assert next_delay(1, LIMITS) == 1.0 and next_delay(2, LIMITS) == 10.0
    assert next_delay(3, LIMITS) is None


@given(st.lists(st.one_of(st.none(), st.integers(100, 599)), min_size=1, max_size=20))
def test_every_delivery_ends_within_its_attempts(answers: list[int | None]) -> None:
    d = _delivery()
    for i, status in enumerate(answers):
        if d.status is not DeliveryStatus.PENDING:
            break
        d = after_attempt(d, _attempt(float(i), status), LIMITS)
    assert len(d.attempts) <= LIMITS.max_attempts
    if len(d.attempts) == LIMITS.max_attempts:
        assert d.status is not DeliveryStatus.PENDING


def test_secrets_sealed_with_a_key_and_plain_without() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_") and len(secret) > 40
    key = bytes(range(32))
    scheme, sealed = Sealer(key).seal(secret)
    assert scheme == SEALED and secret.encode() not in sealed
    assert Sealer(key).open(scheme, sealed) == secret
    with pytest.raises(SecretUnavailable):
        Sealer(None).open(scheme, sealed)
    with pytest.raises(SecretUnavailable):
        Sealer(bytes(32)).open(scheme, sealed)
    assert Sealer(None).seal(secret) == (PLAIN, secret.encode())
    assert "key" not in repr(Sealer(key)).lower().replace("sealing", "")
