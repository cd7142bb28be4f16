"""Redaction and erasure against real servers: secrets an agent sends are redacted before
they are stored (and the record says which rule, not the value); a decision erased
inside a subtree still takes part in a dry run, a revert, the tree as of the revert, the
correction's diff and `agents audit verify`, each showing "(erased)"; erasing the plan
then removes the archived copies; afterwards nothing in MongoDB or the archive names
the erased text."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from contracts.retention.erasure import ERASED
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.audit_support import (
    AGENT,
    ALICE,
    MEMBERS,
    WORKER,
    ended,
    publish_signed,
    verifier_command,
)
from tests.integration.cli_support import Agents, agents
from tests.integration.wire import until
from tests.trust_support import write_principals, write_seed

__all__ = ["agents"]

pytestmark = pytest.mark.e2e

SECRET_Q = "Should we e-mail jane.roe@example.org about quota QX-77731?"
KEY = "sk-proj-" + "Zq7" * 10
PATH = "src/customer_qx77731.py"


@pytest.fixture
async def rig(nats_server: ManagedServer, mongo_uri: str, db_name: str, tmp_path: Path
              ) -> AsyncIterator[tuple[Workers, Path, dict[str, str]]]:
    principals = write_principals(tmp_path / "principals.toml", *MEMBERS)
    (tmp_path / "artifacts" / "src").mkdir(parents=True)
    (tmp_path / "artifacts" / PATH).write_text("quota for QX-77731\n")
    env = worker_env(nats_server.url, mongo_uri, db_name, LEDGER_PRINCIPALS=str(principals),
                     NATS_NKEY_SEED=str(write_seed(tmp_path / "worker.seed", WORKER)),
                     ARCHIVE_ROOT=str(tmp_path / "archive"),
                     ARTIFACTS_ROOT=str(tmp_path / "artifacts"), CORRECTIONS_RETRY_DELAY="0.2")
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    cli_env = {"LEDGER_PRINCIPALS": str(principals), "ARCHIVE_ROOT": str(tmp_path / "archive"),
               "NATS_NKEY_SEED": str(write_seed(tmp_path / "alice.seed", ALICE))}
    try:
        yield w, tmp_path, cli_env
    finally:
        await w.stop()


async def _everything(db: AsyncDatabase[Document]) -> str:
    """Every document of every collection, as text."""
    found = []
    for name in await db.list_collection_names():
        async for doc in db[name].find({}):
            found.append(repr(doc))
    return "\n".join(found)


def _files(folder: Path) -> str:
    return "\n".join(f"{p}\n{p.read_text(errors='replace')}" for p in folder.rglob("*")
                     if p.is_file())


async def test_redaction_then_erasure_keeps_the_tree_whole(
        rig: tuple[Workers, Path, dict[str, str]], nc: nats.NATS,
        db: AsyncDatabase[Document], agents: Agents) -> None:
    _, tmp, env = rig
    top = root(project="billing")
    plan = top["plan_id"]
    a = decision(plan, top["decision_id"], question=SECRET_Q, rationale=f"key {KEY}")
    b = decision(plan, a["decision_id"], "implementation_choice",
                 artifacts_produced=[{"artifact_path": PATH, "artifact_type": "file"}])
    c = decision(plan, b["decision_id"], "tool_invocation")
    d = decision(plan, top["decision_id"], actor_reasoning="card 4111 1111 1111 1111")
    await publish_signed(nc.jetstream(), AGENT, [top, a, b, c, d])
    await until(lambda: _count(db, plan, 5))

    await _redacted_on_the_way_in(db, nc, plan, a["decision_id"], d["decision_id"])
    await _verified(agents, plan, env)

    # Erase a decision inside the subtree root -> a -> b -> c.
    erased = (await agents.ok("erase", a["decision_id"], "--reason", "GDPR art. 17 request",
                              "--json", env=env)).json
    assert erased["decision_ids"] == [a["decision_id"]] and erased["records_erased"] == 1
    stored = await db.decisions.find_one({"_id": a["decision_id"]})
    assert stored is not None and stored["question"] == ERASED
    assert stored["erased"]["by"] == "alice" and stored["sequence_number"] == 1
    shown = (await agents.ok("audit", "verify", plan, env=env)).out
    assert "erased: 1 record(s)" in shown and a["decision_id"] in shown
    record = await db.erasures.find_one({"_id": erased["erasure_id"]})
    assert record is not None and record["by"] == "alice" and record["verified"]
    assert record["reason"] == "GDPR art. 17 request" and record["status"] == "erased"
    await _verified(agents, plan, env)

    dry = (await agents.ok("plan", "correct", "--mode=revert", a["decision_id"], "--dry-run",
                           "--json")).json
    assert {a["decision_id"], b["decision_id"], c["decision_id"]} <= _ids(dry)

    ops = CorrectionClient(nc, signer=ALICE.signer)
    cid = await ops.request(plan, a["decision_id"], "revert", "Ask the billing team")
    assert (await ended(db, cid))["status"] == "applied"
    assert (tmp / "archive").exists() and "QX-77731" in _files(tmp / "archive")

    before = (await agents.ok("plan", "tree", plan, "--as-of", cid, "--before", "--json")).json
    assert ERASED in repr(before) and a["decision_id"] in repr(before)
    diff = (await agents.ok("correction", "diff", cid, "--json")).json
    assert a["decision_id"] in repr(diff) and ERASED in repr(diff)
    await _verified(agents, plan, env)

    # A reference inside a nested list (b's artifact path) is found, and only said.
    found = (await agents.ok("erase", "--mentions", "customer_qx77731", "--reason", "ask",
                             "--dry-run", "--json", env=env)).json
    assert found["decision_ids"] == [b["decision_id"]] and found["records_erased"] == 0

    # The whole plan: every decision, the correction's guidance, the archived copy.
    whole = (await agents.ok("erase", "--plan", plan, "--reason", "customer left",
                             "--json", env=env)).json
    assert whole["files_removed"] == 1 and cid in whole["correction_ids"]
    await _verified(agents, plan, env)
    await _verified_offline(agents, plan, env, tmp / "erased.jsonl")
    everything = await _everything(db) + _files(tmp / "archive")
    for text in ("jane.roe", "QX-77731", "qx77731", "Ask the billing team", KEY, "4111 1111"):
        assert text not in everything, text
    tree = (await agents.ok("plan", "tree", plan, "--show-superseded", "--json")).json
    # Every record is still there (with the revert's replacement), its text erased.
    assert {x["decision_id"] for x in (top, a, b, c, d)} <= _ids(tree)
    assert all(x["question"] == ERASED for x in tree["decisions"] if x["plan_id"] == plan)


async def test_erase_needs_a_reason_and_one_target(agents: Agents) -> None:
    r = await agents("erase", "01J0000000000000000000000A")
    assert r.code == 2 and "--reason" in r.err
    r = await agents("erase", "--plan", "01J0000000000000000000000A", "--mentions", "x",
                     "--reason", "why")
    assert r.code == 2 and "exactly one" in r.err


async def _redacted_on_the_way_in(db: AsyncDatabase[Document], nc: nats.NATS, plan: str,
                                  a: str, d: str) -> None:
    """Marks name field and rule, never the value; a dead letter's payload is redacted
    too (an invalid body is kept for the operator)."""
    stored = await db.decisions.find_one({"_id": a})
    assert stored is not None and KEY not in repr(stored)
    assert {"field": "rationale", "rule": "api_key", "count": 1} in stored["redactions"]
    assert {"field": "question", "rule": "email", "count": 1} in stored["redactions"]
    d_doc = await db.decisions.find_one({"_id": d})
    assert d_doc is not None and d_doc["actor_reasoning"] == "card [redacted:card]"
    await nc.jetstream().publish(f"decisions.recorded.{plan}",
                                 b'{"oops": "from bob@example.net with ' + KEY.encode() + b'"}')
    letter = await until(lambda: db.dead_letters.find_one({"subject": {"$regex": plan}}))
    assert b"bob@" not in letter["payload"] and KEY.encode() not in letter["payload"]
    assert {r["rule"] for r in letter["redactions"]} == {"email", "api_key"}


async def _verified_offline(agents: Agents, plan: str, env: dict[str, str], export: Path
                            ) -> None:
    """The plan's export passes the standalone verifier."""
    await agents.ok("audit", "export", plan, "--output", str(export), env=env)
    offline = subprocess.run(verifier_command(export), check=False, capture_output=True,
                             text=True, timeout=60)
    assert offline.returncode == 0 and "chain intact" in offline.stdout, offline.stdout


async def _count(db: AsyncDatabase[Document], plan: str, n: int) -> bool:
    return await db.decisions.count_documents({"plan_id": plan}) >= n


async def _verified(agents: Agents, plan: str, env: dict[str, str]) -> None:
    r = await agents("audit", "verify", plan, "--json", env=env)
    assert r.code == 0, r.out + r.err


def _ids(value: Any) -> set[str]:
    """Every decision ID a JSON answer names (under any key)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "decision_id" and isinstance(v, str):
                found.add(v)
            found |= _ids(v)
    elif isinstance(value, list):
        for v in value:
            found |= _ids(v)
    return found
