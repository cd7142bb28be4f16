"""The committed AsyncAPI document is what the declared message families say."""

import pytest

from contracts.families import FAMILIES
from workers.asyncapi import DOC_PATH, document, render

pytestmark = pytest.mark.unit


def test_committed_document_matches_the_code() -> None:
    assert DOC_PATH.read_text() == render(), "stale: run python -m workers.asyncapi"


def test_document_describes_every_family() -> None:
    doc = document()
    channels = {c["address"] for c in doc["channels"].values()}
    assert {"decisions.recorded.{plan_id}", "decisions.persisted.{plan_id}",
            "decisions.rejected.{plan_id}"} <= channels
    assert {f.subject for f in FAMILIES} <= channels
    assert doc["operations"]["decisions.recorded"]["action"] == "receive"
    assert doc["operations"]["corrections.events"]["action"] == "send"
    reply = doc["operations"]["corrections.dryrun"]["reply"]["messages"]
    assert [m["$ref"].rsplit("/", 1)[1] for m in reply] == ["DryRunReport", "DryRunError"]
    for name in ("Decision", "CorrectionRequest", "DryRunReport", "ViolationEvent"):
        assert name in doc["components"]["schemas"]
