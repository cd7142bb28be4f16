"""A LangGraph agent whose tool calls wait for a person when an invariant says so.

    .venv/bin/agents invariant add prod-writes --description "Writes under deploy/prod/ \
        need a person's approval" --needs-approval \
        --check '!(tool.name == "write_file" && tool.arguments.path.startsWith("deploy/prod/"))'
    .venv/bin/python examples/langgraph_approvals.py [--timeout S]

No model: the agent is asked to ship two config files, deploy/prod/app.yaml and
deploy/prod/db.yaml. For each it records the tool call (`write_file`), then passes a
gate node (`GraphLedger.gate`): the ledger held the decision for a person, so the graph
pauses with LangGraph's `interrupt()` and the runtime waits for the verdict. From the
CLI, approve the first (`agents approval approve ID`): the graph resumes and writes the
file under ARTIFACTS_ROOT. Deny the second with guidance (`agents approval deny ID
--reason ... --guidance "write it to deploy/staging/ first"`): the graph resumes down
the denied route, records a decision that follows the guidance and writes the staging
file instead. It prints each decision and what it waits for; `--timeout S` bounds each
wait for a verdict (exit 1 when one does not come). NATS_URL defaults to what
`agents up` uses; the checkpoints stay in the process (InMemorySaver).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run from a clone without installing: make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients import DecisionRecorder, DecisionType

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.state import CompiledStateGraph

    from clients.langgraph import GraphLedger, LedgerState, pointer
    from contracts.corrections.resume_points import ResumePoint
except ImportError as exc:
    sys.exit(f"{exc}\nInstall the LangGraph extra: .venv/bin/pip install -e '.[langgraph]'")

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
TASK = "Ship the billing service's config"
FILES = ["deploy/prod/app.yaml", "deploy/prod/db.yaml"]


class ShipState(LedgerState, total=False):
    todo: list[str]
    written: list[str]


def build(ledger: GraphLedger, artifacts: Path) -> CompiledStateGraph[Any]:
    """propose -> approval -> write | follow_guidance | stop, once per file."""
    rec = ledger.recorder

    def write(path: str) -> None:
        (artifacts / path).parent.mkdir(parents=True, exist_ok=True)
        (artifacts / path).write_text(f"# {path}\n")

    async def propose(state: ShipState, config: RunnableConfig) -> dict[str, Any]:
        path = state["todo"][0]
        update = await ledger.tool_call(state, config,
                                        {"name": "write_file", "args": {"path": path}})
        d = pointer(update)
        held = await rec.held_as(ResumePoint(plan_id=d["plan_id"],
                                             decision_id=d["decision_id"]))
        print(f"  {d['decision_id']}  tool_invocation  write_file {path}", flush=True)
        if held.hold:
            print(f"awaiting approval: {d['decision_id']} (agents approval approve|deny "
                  f"{d['decision_id']})", flush=True)
        return update

    async def approval(state: ShipState, config: RunnableConfig) -> dict[str, Any]:
        return await ledger.gate(state, config)

    async def do_write(state: ShipState, config: RunnableConfig) -> dict[str, Any]:
        path, verdict = state["todo"][0], state["approval"]
        write(path)
        by = verdict.get("decided_by") or ("an unverified operator" if verdict.get("held")
                                           else "nobody (not held)")
        print(f"approved by {by}: wrote {path}", flush=True)
        return {"todo": state["todo"][1:], "written": [*state.get("written", []), path]}

    async def follow_guidance(state: ShipState, config: RunnableConfig) -> dict[str, Any]:
        path, verdict = state["todo"][0], state["approval"]
        said = verdict.get("guidance") or ""
        instead = path.replace("deploy/prod/", "deploy/staging/")
        print(f"denied by {verdict.get('decided_by') or 'an unverified operator'}: "
              f"{verdict.get('reason')}; "
              f"guidance: {said}", flush=True)
        update = await ledger.decide(
            state, config, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            question=f"{path} was denied: what instead?", chosen_option=f"write {instead}",
            rationale=f"the operator's guidance: {said}")
        write(instead)
        print(f"  {pointer(update)['decision_id']}  implementation_choice  wrote {instead}",
              flush=True)
        return {**update, "todo": state["todo"][1:],
                "written": [*state.get("written", []), instead]}

    def more(state: ShipState) -> str:
        return "propose" if state.get("todo") else END

    builder = StateGraph(ShipState)
    for name, node in (("propose", propose), ("approval", approval), ("write", do_write),
                       ("follow_guidance", follow_guidance)):
        builder.add_node(name, node)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approval")
    builder.add_conditional_edges("approval", GraphLedger.verdict(), {
        "approved": "write", "denied": "follow_guidance", "expired": END, "changed": END,
        "refused": END})
    builder.add_conditional_edges("write", more, ["propose", END])
    builder.add_conditional_edges("follow_guidance", more, ["propose", END])
    return builder.compile(checkpointer=InMemorySaver())


async def main(args: argparse.Namespace) -> int:
    artifacts = Path(os.environ.get("ARTIFACTS_ROOT") or tempfile.mkdtemp(prefix="agent-"))
    async with DecisionRecorder.connect(NATS_URL) as rec:
        ledger = GraphLedger(rec, approval_timeout=args.timeout)
        ledger.bind(build(ledger, artifacts))
        print(f"plan: {TASK} (files under {artifacts})", flush=True)
        try:
            run = await ledger.start(TASK, {"todo": list(FILES), "written": []},
                                     project=args.project)
        except TimeoutError:
            print("no verdict came in time", flush=True)
            return 1
        print(f"plan_id {run.plan_id}: done, wrote {', '.join(run.values['written'])}",
              flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, help="seconds to wait for each verdict")
    parser.add_argument("--project", help="the plan's project")
    try:
        sys.exit(asyncio.run(main(parser.parse_args())))
    except KeyboardInterrupt:
        sys.exit(130)
