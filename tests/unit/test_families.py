"""The message families are declared once, and what is derived from them agrees: the
streams' subjects, the workers' durables and handlers, the settings they name."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bootstrap.settings import Settings
from contracts.corrections.requests import CorrectionRequest
from contracts.families import FAMILIES, STREAMS, captured, family, worker_consumers
from contracts.recording.families import DECISIONS
from contracts.shared.families import Direction, MessageFamily
from contracts.shared.roles import Publisher, Reader, Role, Via
from services.corrections.policy import no_crash
from workers.deps import Deps
from workers.durables import consumer_config, setting
from workers.handlers import HANDLERS

pytestmark = pytest.mark.unit

PLAN = "01JD7X4Q9R8N2V5K3M6P1T0W7Y"


def _absent() -> Any:
    raise AssertionError("no service is reached while building a handler")


DEPS = Deps(Settings(), recorder=_absent, corrections=_absent, invariants=_absent,
            dead_letters=_absent, upkeep=_absent, crash=no_crash)


def test_the_streams_capture_what_they_always_did() -> None:
    subjects = {s.name: captured(s) for s in STREAMS}
    assert subjects["DECISIONS"] == ["decisions.>"]
    assert subjects["INVARIANTS"] == ["invariants.>"]
    assert sorted(subjects["CORRECTIONS"]) == sorted([
        "corrections.requested.*", "corrections.cancel.*", "corrections.events.*.*",
        "corrections.attempts.*.*", "corrections.cancel_refused.*", "corrections.rejected.*",
        "corrections.fail.*", "corrections.fail_refused.*", "corrections.retry.*",
        "corrections.retry_refused.*", "corrections.resume.*"])
    # A request-reply family stays uncaptured: a stream would answer it with a PubAck.
    assert family("corrections.dryrun").stream is None


def test_names_and_durables_are_unique() -> None:
    assert not [n for n, c in Counter(f.name for f in FAMILIES).items() if c > 1]
    durables = [(f.stream, r.durable) for f, r in worker_consumers()]
    assert len(durables) == len(set(durables))


def test_every_worker_durable_has_a_handler_and_every_handler_a_durable() -> None:
    assert set(HANDLERS) == {f.name for f, _ in worker_consumers()}
    assert all(len(f.worker_consumers()) <= 1 for f in FAMILIES)


def test_the_settings_a_consumer_names_exist_and_are_numbers() -> None:
    settings = Settings()
    for _, reader in worker_consumers():
        assert reader.consumer is not None
        spec = reader.consumer
        for value in (spec.ack_wait, spec.batch_size, spec.max_wait):
            if isinstance(value, str):
                assert isinstance(getattr(settings, value), int | float), value


@pytest.mark.parametrize("value", ["0", "-1", "31"])
def test_a_pull_wait_out_of_bounds_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch,
                                                        value: str) -> None:
    monkeypatch.setenv("PULL_WAIT_SECONDS", value)
    with pytest.raises(ValueError, match="PULL_WAIT_SECONDS"):
        Settings.from_env()


def test_every_idle_pull_waits_pull_wait_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULL_WAIT_SECONDS", "0.25")
    settings = Settings.from_env()
    for _, reader in worker_consumers():
        assert reader.consumer is not None
        assert setting(settings, reader.consumer.max_wait) == 0.25


def test_a_handler_counts_waits_exactly_when_its_family_declares_them() -> None:
    for f, reader in worker_consumers():
        assert reader.consumer is not None
        waits = HANDLERS[f.name](DEPS).extra_deliveries()
        assert (waits > 0) == (reader.consumer.waits is not None), f.name


def test_the_recorders_durable_is_configured_as_before() -> None:
    recorded = family("decisions.recorded")
    [reader] = recorded.worker_consumers()
    config = consumer_config(recorded, reader, Settings(recorder_batch_size=10_000))
    assert (config.durable_name, config.filter_subject) == ("recorder", "decisions.recorded.*")
    assert config.max_ack_pending == 40_000
    assert config.ack_wait == Settings().recorder_ack_wait_seconds
    assert reader.consumer is not None and reader.consumer.one_replica


def test_who_publishes_and_who_reads() -> None:
    for f in FAMILIES:
        assert f.publishers, f"{f.name} has no publisher"
        if f.direction is Direction.INBOUND:
            assert any(r.role is Role.WORKER for r in f.readers), f.name
        else:  # an event: the workers announce it; others at most a narrower part
            assert any(p.role is Role.WORKER and p.subject is None for p in f.publishers)
            assert all(p.role is Role.WORKER or p.subject is not None for p in f.publishers)
    responder = [r for r in family("corrections.dryrun").readers if r.via is Via.RESPONDER]
    assert [r.queue for r in responder] == ["corrections-dryrun"]


def test_a_family_builds_its_subjects_and_refuses_a_token_that_is_no_plan() -> None:
    events = family("corrections.events")
    assert events.subject_for(PLAN.lower(), status="applied") == \
        f"corrections.events.{PLAN}.applied"
    assert events.wildcard == "corrections.events.*.*"
    for bad in ("a.b", "*", ">"):
        with pytest.raises(ValueError, match="ULID"):
            events.subject_for(bad, status="applied")


@pytest.mark.parametrize(("subject", "stream", "readers", "publisher", "error"), [
    ("decisions.x.{who}", DECISIONS, (), None, "tokens"),
    ("decisions.x", DECISIONS, (), None, "tokens"),
    ("corrections.x.{plan_id}", DECISIONS, (), None, "outside stream"),
    ("decisions.x.{plan_id}", None, (Reader(Role.WORKER, Via.CORE, "t"),), None,
     "request-reply"),
    ("decisions.x.{plan_id}", DECISIONS, (), "decisions.y.{plan_id}", "does not narrow"),
])
def test_a_declaration_that_contradicts_itself_is_refused(
        subject: str, stream: Any, readers: tuple[Reader, ...], publisher: str | None,
        error: str) -> None:
    with pytest.raises(ValueError, match=error):
        MessageFamily(subject, CorrectionRequest, Direction.INBOUND, stream, msg_id=None,
                      description="", readers=readers,
                      publishers=(Publisher(Role.OPERATOR, "t", subject=publisher),))


def test_a_reader_says_how_it_reads() -> None:
    with pytest.raises(ValueError, match="durable"):
        Reader(Role.AGENT, Via.DURABLE, "t")
    with pytest.raises(ValueError, match="queue group"):
        Reader(Role.WORKER, Via.RESPONDER, "t")
    with pytest.raises(ValueError, match="consumer spec"):
        Reader(Role.AGENT, Via.DURABLE, "t", durable="x",
               consumer=family("decisions.recorded").worker_consumers()[0].consumer)
