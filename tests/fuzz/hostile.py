"""Hostile messages for every inbound subject, as hypothesis strategies.

What a buggy agent or an attacker can put on a subject we consume: random bytes,
deep nesting, huge lists and strings, dates and numbers out of range, wrong types,
IDs of other plans, payloads at and over the size limit. Every message built here
breaks at least one rule by construction, so the system must dead-letter it (or,
where a subject has no dead letters, answer or skip it) and go on with the rest.

`corpus` draws a fixed number of examples without running a property test, so the
same strategies feed the short e2e suite (derandomized: the same corpus every run)
and the long fuzz run (`bench/fuzz_run.py`, seeded).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed
from hypothesis import strategies as st

from contracts.shared.ids import new_id
from tests.factories import decision

MiB = 1024 * 1024
NATS_MAX_PAYLOAD = MiB
"""nats-server's default max_payload: nothing larger can be published at all."""


@dataclass(frozen=True)
class Hostile:
    """One message to publish: where, what, with which headers, and why it is bad."""

    family: str          # decisions | requests | cancels | violations | began | dryrun
    subject: str
    data: bytes
    headers: dict[str, str]
    kind: str            # which category of hostility, for the printed tally


DATES = ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00", "10000-01-01T00:00:00Z",
         "-0001-01-01T00:00:00Z", "2026-13-45T99:99:99Z", "", "yesterday"]
REQUIRED = frozenset({"correction_id", "plan_id", "decision_id", "violation_id", "invariant_id",
                      "retry_id", "mode", "severity", "details", "requested_by", "question",
                      "chosen_option", "decision_type", "context_snapshot", "request_id",
                      "action_template"})
"""Fields no body may leave out (where a family's field has a default, it is in the
family's `optional` instead)."""
NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "1" + "0" * 400, "0x10", "1.5",
           "-0.000000000000000000001"]
"""Numbers no field takes (-0 would be a valid confidence_score)."""
WRONG = [[], {}, 0, -1, True, None, "x", [[[]]], {"a": {"b": {}}}, 1.5, "0" * 26]

# Fields of each wire model and the families that consume them.
DECISION_FIELDS = ["decision_id", "plan_id", "parent_decision_id", "decision_type", "question",
                   "chosen_option", "alternatives_considered", "confidence_score",
                   "context_snapshot", "rationale", "downstream_decision_ids",
                   "downstream_plan_ids", "artifacts_produced", "created_at"]
REQUEST_FIELDS = ["correction_id", "plan_id", "decision_id", "mode", "guidance", "requested_by",
                  "requested_at"]
CANCEL_FIELDS = ["correction_id", "plan_id", "reason"]
FAIL_FIELDS = ["correction_id", "plan_id", "reason"]
RETRY_FIELDS = ["correction_id", "plan_id", "retry_id", "reason", "requested_by"]
VIOLATION_FIELDS = ["violation_id", "invariant_id", "plan_id", "decision_id", "severity",
                    "details", "reported_at"]
TEMPLATE_FIELDS = ["request_id", "plan_id", "action_template"]
VERDICT_FIELDS = ["request_id", "plan_id", "decision_id", "verdict", "digest", "reason"]


def nested(depth: int, obj: bool) -> bytes:
    """`[[[[…` or `{"a":{"a":…`: what blows a recursive parser's stack."""
    if obj:
        return (b'{"a":' * depth) + b"1" + (b"}" * depth)
    return (b"[" * depth) + (b"]" * depth)


def nested_value(depth: int) -> Any:
    """A JSON value nested `depth` objects deep (past the tool arguments' bound at 9)."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def request_body(plan_id: str, decision_id: str | None = None) -> dict[str, Any]:
    return {"correction_id": new_id(), "plan_id": plan_id, "decision_id": decision_id or new_id(),
            "mode": "append", "guidance": "Use the other approach.", "requested_by": "fuzz"}


def cancel_body(plan_id: str) -> dict[str, Any]:
    return {"correction_id": new_id(), "plan_id": plan_id, "reason": "fuzz"}


def fail_body(plan_id: str) -> dict[str, Any]:
    return {"correction_id": new_id(), "plan_id": plan_id, "reason": "fuzz"}


def retry_body(plan_id: str) -> dict[str, Any]:
    return {"correction_id": new_id(), "plan_id": plan_id, "retry_id": new_id(),
            "reason": "fuzz", "requested_by": "fuzz"}


def violation_body(plan_id: str) -> dict[str, Any]:
    return {"violation_id": new_id(), "invariant_id": new_id(), "plan_id": plan_id,
            "severity": "error", "details": "fuzz"}


def template_body(plan_id: str) -> dict[str, Any]:
    return {"request_id": new_id(), "plan_id": plan_id, "action_template": "fuzz-template"}


def verdict_body(plan_id: str) -> dict[str, Any]:
    return {"request_id": new_id(), "plan_id": plan_id, "decision_id": new_id(),
            "verdict": "grant", "digest": "sha256:fuzz", "reason": "fuzz"}


BODIES: dict[str, tuple[str, Callable[[str], dict[str, Any]], list[str], str]] = {
    # family: (subject prefix, a valid-shaped body, its fields, the id field for Nats-Msg-Id)
    "requests": ("corrections.requested", request_body, REQUEST_FIELDS, "correction_id"),
    "cancels": ("corrections.cancel", cancel_body, CANCEL_FIELDS, "correction_id"),
    "fails": ("corrections.fail", fail_body, FAIL_FIELDS, "correction_id"),
    "retries": ("corrections.retry", retry_body, RETRY_FIELDS, "retry_id"),
    "violations": ("invariants.violations", violation_body, VIOLATION_FIELDS, "violation_id"),
    "templates": ("invariants.templates", template_body, TEMPLATE_FIELDS, "request_id"),
    "verdicts": ("invariants.verdicts", verdict_body, VERDICT_FIELDS, "request_id"),
    "dryrun": ("corrections.dryrun", request_body, REQUEST_FIELDS, "correction_id"),
}


@st.composite
def garbage(draw: st.DrawFn) -> tuple[bytes, str]:
    """Bodies no consumer can read: the reader must name a rule, never raise."""
    kind = draw(st.sampled_from(["bytes", "nested_array", "nested_object", "not_object",
                                 "bad_utf8", "json_scalar", "empty"]))
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=2048)), kind
    if kind in ("nested_array", "nested_object"):
        return nested(draw(st.integers(500, 60_000)), kind == "nested_object"), kind
    if kind == "not_object":
        return json.dumps(draw(st.lists(st.integers(), max_size=50))).encode(), kind
    if kind == "bad_utf8":
        return b'{"a": "' + draw(st.binary(min_size=1, max_size=64)) + b'\xff\xfe"}', kind
    if kind == "json_scalar":
        return draw(st.sampled_from([b"null", b"1e400", b"NaN", b'"x"', b"true"])), kind
    return b"", kind


def _replace_raw(body: dict[str, Any], field: str, raw_json: str) -> bytes:
    """The body with one field's JSON text replaced verbatim (1e400, NaN, bad dates…)."""
    marker = "__FUZZ_MARKER__"
    text = json.dumps({**body, field: marker})
    return text.replace(json.dumps(marker), raw_json).encode()


@st.composite
def spoiled(draw: st.DrawFn, body: dict[str, Any], fields: list[str],
            date_fields: tuple[str, ...], optional: frozenset[str] = frozenset()
            ) -> tuple[bytes, str]:
    """A well-formed body with one field made hostile."""
    kind = draw(st.sampled_from(["wrong_type", "number", "date", "huge_string", "huge_list",
                                 "unknown_field", "missing"]))
    field = draw(st.sampled_from(fields))
    if kind in ("wrong_type", "number") and field in date_fields:
        # A number is a valid time (seconds since the epoch): dates go wrong in "date".
        field = draw(st.sampled_from([f for f in fields if f not in date_fields]))
    if kind == "wrong_type":
        # A value of another JSON type than the field's: a string for a string field
        # could be valid (a free-text field takes any string), and a number field takes
        # true as 1.0 and "000" as 0.0.
        was = type(body.get(field))
        value = draw(st.sampled_from([w for w in WRONG if type(w) is not was
                                      and not (was is float and type(w) in (int, bool, str))
                                      and not (w is None and field in optional)]))
        return json.dumps({**body, field: value}).encode(), kind
    if kind == "number":
        return _replace_raw(body, field, draw(st.sampled_from(NUMBERS))), kind
    if kind == "date":
        field = draw(st.sampled_from(date_fields))
        return json.dumps({**body, field: draw(st.sampled_from(DATES))}).encode(), kind
    if kind in ("huge_string", "huge_list"):
        # Into an ID: a long reasoning text or a long list of alternatives is valid input.
        field = draw(st.sampled_from([f for f in fields if f.endswith(("_id", "_ids"))]))
    if kind == "huge_string":
        size = draw(st.integers(10_000, 200_000))  # 2 bytes each in UTF-8: up to 400 KB
        return json.dumps({**body, field: "é" * size}, ensure_ascii=False).encode(), kind
    if kind == "huge_list":
        size = draw(st.integers(1_000, 15_000))
        return json.dumps({**body, field: ["not-a-ulid"] * size}).encode(), kind
    if kind == "unknown_field":
        return json.dumps({**body, draw(st.sampled_from(["$where", "__proto__", "x" * 300])):
                           1}).encode(), kind
    rest = {k: v for k, v in body.items() if k != field}
    if rest == body or field in optional or field not in REQUIRED:
        # Leaving out an optional field would keep the body valid: break it instead.
        return json.dumps({**body, field: {"$gt": ""}}).encode(), "wrong_type"
    return json.dumps(rest).encode(), kind


@st.composite
def hostile_decision(draw: st.DrawFn, plan_id: str, parent_id: str, other_plan: tuple[str, str],
                     limit: int) -> Hostile:
    """A bad message on decisions.recorded.<plan_id>."""
    subject = f"decisions.recorded.{plan_id}"
    d = decision(plan_id, parent_id, "implementation_choice")
    headers = {"Nats-Msg-Id": d["decision_id"]}
    kind = draw(st.sampled_from(["garbage", "spoiled", "other_plan_parent", "subject_of_other",
                                 "over_limit", "bad_ids", "bad_artifact", "bad_tool"]))
    if kind == "garbage":
        data, sub = draw(garbage())
        return Hostile("decisions", subject, data, {"Nats-Msg-Id": new_id()}, sub)
    if kind == "spoiled":
        data, sub = draw(spoiled(d, DECISION_FIELDS, ("created_at",),
                                 frozenset({"confidence_score", "created_at", "rationale"})))
        return Hostile("decisions", subject, data, headers, sub)
    if kind == "other_plan_parent":
        d["parent_decision_id"] = other_plan[1]
        return Hostile("decisions", subject, json.dumps(d).encode(), headers, kind)
    if kind == "subject_of_other":
        return Hostile("decisions", f"decisions.recorded.{other_plan[0]}",
                       json.dumps(d).encode(), headers, kind)
    if kind == "over_limit":
        size = draw(st.integers(limit + 1, NATS_MAX_PAYLOAD - 4096))
        d["rationale"] = ""
        pad = size - len(json.dumps(d).encode())
        d["rationale"] = "x" * max(pad, 1)
        return Hostile("decisions", subject, json.dumps(d).encode(), headers, kind)
    if kind == "bad_artifact":
        d["artifacts_produced"] = [{"artifact_path": draw(st.sampled_from(
            ["/etc/passwd", "../../secret", "a/\x00/b", "a/" + "x" * 300, "src/\x1b[31m.py"])),
            "artifact_type": "file"}]
        return Hostile("decisions", subject, json.dumps(d).encode(), headers, kind)
    if kind == "bad_tool":
        d["tool"] = draw(st.sampled_from([
            {"name": "shell", "arguments": {"a": nested_value(9)}},
            {"name": "shell", "arguments": {f"k{i}": i for i in range(300)}},
            {"name": "shell", "arguments": {"cmd": "x" * 20_000}},
            {"name": "", "arguments": {}}, {"name": "shell", "arguments": [1, 2]},
            {"name": "x" * 300}]))
        return Hostile("decisions", subject, json.dumps(d).encode(), headers, kind)
    n = draw(st.integers(100, 12_000))
    d["downstream_decision_ids"] = [f"bad-{i}" for i in range(n)]
    return Hostile("decisions", subject, json.dumps(d).encode(), headers, kind)


@st.composite
def hostile_command(draw: st.DrawFn, family: str, plan_id: str, other_plan: str) -> Hostile:
    """A bad correction request, cancel, violation report or dry run."""
    prefix, make, fields, id_field = BODIES[family]
    body = make(plan_id)
    subject = f"{prefix}.{plan_id}"
    headers = {"Nats-Msg-Id": body[id_field]}
    # Where a date goes wrong: a cancel has no date field, so its ID gets one (no ULID).
    dates = ("reported_at",) if family == "violations" else ("requested_at",) \
        if family in ("requests", "dryrun") \
        else ("request_id",) if family in ("templates", "verdicts") \
        else ("correction_id",)
    kind = draw(st.sampled_from(["garbage", "spoiled", "subject_of_other"]))
    if kind == "garbage":
        data, sub = draw(garbage())
        return Hostile(family, subject, data, {"Nats-Msg-Id": new_id()}, sub)
    if kind == "subject_of_other":
        return Hostile(family, f"{prefix}.{other_plan}", json.dumps(body).encode(), headers, kind)
    # Fields where null is fine (optional, or filled in by the worker).
    optional = frozenset({"reason", "reported_at", "requested_at"} |
                         ({"decision_id"} if family == "violations" else set()) |
                         ({"requested_by"} if family == "retries" else set()))
    data, sub = draw(spoiled(body, fields, dates, optional))
    return Hostile(family, subject, data, headers, sub)


@st.composite
def hostile_began(draw: st.DrawFn, plan_id: str) -> Hostile:
    """Someone else's message on decisions.began.*, the reconciler's input."""
    data, kind = draw(garbage())
    if draw(st.booleans()):
        data = json.dumps({"decision_id": "x", "plan_id": plan_id,
                           "decision_type": "prompt_definition", "sequence_number": "1e400",
                           "parent_decision_id": [[]]}).encode()
        kind = "fake_root"
    return Hostile("began", f"decisions.began.{plan_id}", data,
                   {"Nats-Msg-Id": new_id()}, kind)


def corpus(strategy: st.SearchStrategy[Hostile], n: int, *, seed: int | None = None
           ) -> list[Hostile]:
    """Draw `n` examples: the same ones every run without a seed, others with one."""
    out: list[Hostile] = []

    @settings(max_examples=n, database=None, derandomize=seed is None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(strategy)
    def collect(h: Hostile) -> None:
        out.append(h)

    if seed is not None:
        with_seed(seed)(collect)()
    else:
        collect()
    return out[:n]
