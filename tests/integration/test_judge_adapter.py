"""The judge adapter against a local server that speaks the chat completions API: the
request it sends, each verdict read, and every failure (a slow answer past the
timeout, an HTTP 500, garbage, a refusal, an oversized answer) read as a failure, never
as a verdict."""

from __future__ import annotations

import pytest

from bootstrap.judge import OpenAIChatJudge
from bootstrap.judge_settings import JudgeSettings
from contracts.decisions.model import Decision
from contracts.invariants.evaluation import Verdict
from contracts.invariants.judge import failed, messages, read_answer
from contracts.invariants.model import Invariant
from contracts.shared.ids import new_id
from services.ports.judge import JudgeUnavailable
from tests.factories import decision
from tests.judge_server import JudgeServer, judge_server

__all__ = ["judge_server"]

INVARIANT = Invariant(name="no-prod", description="Never touch production", scope="GLOBAL")


def asked(word: str) -> Decision:
    plan = new_id()
    return Decision.model_validate(decision(plan, new_id(), "tool_invocation",
                                            chosen_option=f"run it {word}"))


async def ruling(judge: OpenAIChatJudge, word: str) -> tuple[Verdict, str]:
    try:
        r = read_answer(await judge.complete(messages(INVARIANT, asked(word))))
    except JudgeUnavailable as exc:
        r = failed(str(exc))
    return r.verdict, r.reason


@pytest.mark.parametrize(("word", "verdict", "says"), [
    ("KEEP", Verdict.KEPT, "judge: the decision is kept"),
    ("BROKEN", Verdict.BROKEN, "judge: the decision is broken"),
    ("FENCED", Verdict.BROKEN, "judge: the decision is broken"),
    ("SLOW", Verdict.UNEVALUATED, "no answer within 1s"),
    ("FAIL500", Verdict.UNEVALUATED, "HTTP 500"),
    ("GARBAGE", Verdict.UNEVALUATED, "not the verdict asked for"),
    ("NOTJSON", Verdict.UNEVALUATED, "not the verdict asked for"),
    ("REFUSE", Verdict.UNEVALUATED, "the judge refused"),
    ("HUGE", Verdict.UNEVALUATED, "over 65536 bytes"),
])
async def test_each_answer_read(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch,
                                word: str, verdict: Verdict, says: str) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    judge = OpenAIChatJudge(JudgeSettings(url=judge_server.url, model="m1",
                                          api_key_env="TEST_JUDGE_KEY", timeout_seconds=1.0,
                                          max_tokens=77))
    try:
        got, reason = await ruling(judge, word)
    finally:
        await judge.close()
    assert got is verdict and says in reason
    [request] = judge_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("m1", 77, 0)
    assert body["messages"][0]["role"] == "system" and "JSON" in body["messages"][0]["content"]
    assert "Never touch production" in body["messages"][1]["content"]


async def test_an_unreachable_judge_is_a_failure() -> None:
    judge = OpenAIChatJudge(JudgeSettings(url="http://127.0.0.1:9", timeout_seconds=1.0))
    try:
        got, reason = await ruling(judge, "KEEP")
    finally:
        await judge.close()
    assert got is Verdict.UNEVALUATED and "the judge failed" in reason
