"""LangGraph integration: a graph records its choices, and resumes where an operator corrected it.

    pip install 'decision-ledger[langgraph]'

    class State(LedgerState, total=False):
        task: str
        strategy: str

    async def choose_strategy(state: State, config: RunnableConfig) -> dict[str, Any]:
        chosen = "redis" if "redis" in guidance(state).lower() else "in-memory cache"
        return await ledger.route(state, config, key="strategy", options=OPTIONS,
                                  chosen=chosen, question="Where do cached values live?")

    ledger = GraphLedger(recorder)                 # nodes close over it
    ledger.bind(builder.compile(checkpointer=MongoDBSaver(client)))
    run = await ledger.start("Cache the pricing API", {"task": "..."})
    async with await ledger.on_resume(plan_id=run.plan_id):
        ...                                        # each correction forks the thread

How the two trees map onto each other (docs/langgraph.md):

- The decision pointer lives in the graph state (`state["ledger"]`, a `LedgerPointer`), so
  it is checkpointed with everything else: a thread forked from a checkpoint goes on under
  the decision that was current at that checkpoint, with no bookkeeping in the runtime.
- Each decision's `actor_state_ref` is `langgraph:<thread_id>:<checkpoint_id>`: the
  checkpoint the recording node ran from (its `next` holds that node). Going back to it
  re-runs that node and everything after it, and nothing before.
- A revert forks the thread from the corrected decision's checkpoint with the pointer at
  the replacement and the operator's guidance in the state, then runs the fork: the
  corrected node itself runs again (it is the one that must choose differently) and
  records its new choice under the replacement. An append runs the child plan as a new
  thread (`thread_id` = the child plan's ID) starting under the child plan's root.
"""

try:
    import langgraph.pregel  # noqa: F401  (the extra; every module here needs it)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "clients.langgraph needs LangGraph: install the extra with "
        "pip install 'decision-ledger[langgraph]'") from exc

# The integration's public API (docs/langgraph.md): importable from clients.langgraph.
from clients.langgraph.approvals import APPROVAL_KEY, ApprovalVerdict
from clients.langgraph.ledger import GraphLedger
from clients.langgraph.outcomes import Resumed, ResumeStatus, Run
from clients.langgraph.state import (
    LEDGER_KEY,
    REF_PREFIX,
    LedgerPointer,
    LedgerState,
    UnresumableInstruction,
    checkpoint_ref,
    guidance,
    parse_checkpoint_ref,
    pointer,
)

__all__ = [
    "APPROVAL_KEY",
    "LEDGER_KEY",
    "REF_PREFIX",
    "ApprovalVerdict",
    "GraphLedger",
    "LedgerPointer",
    "LedgerState",
    "ResumeStatus",
    "Resumed",
    "Run",
    "UnresumableInstruction",
    "checkpoint_ref",
    "guidance",
    "parse_checkpoint_ref",
    "pointer",
]
