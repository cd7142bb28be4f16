"""The committed AsyncAPI document is what the code generates."""

import pytest

from workers.asyncapi import DOC_PATH, document, render

pytestmark = pytest.mark.unit


def test_committed_document_matches_the_code() -> None:
    assert DOC_PATH.read_text() == render(), "stale: run python -m workers.asyncapi"


def test_document_describes_the_recording_subjects() -> None:
    channels = {c["address"] for c in document()["channels"].values()}
    assert {"decisions.recorded.{plan_id}", "decisions.persisted.{plan_id}",
            "decisions.rejected.{plan_id}"} <= channels
