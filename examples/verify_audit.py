#!/usr/bin/env python3
"""Verify an `agents audit export` file offline, with no part of the decision ledger.

    python examples/verify_audit.py EXPORT.jsonl [--principals-from-header | --keys FILE]

Needs only the standard library, PyNaCl and rfc8785 (`pip install pynacl rfc8785`). It
follows the procedure of docs/security.md ("Auditing a plan") step by step, so it can be
read beside it, ported, or run by an auditor who trusts nothing of the ledger's code:

1. every record's content is recomputed from the record as exported, and its link
   digest from that: `changed` if it differs;
2. each plan's links run from `from_seq` without a gap (`removed`), each `prev` is the
   digest before it (`reordered`), and the last is the plan's counter (`removed`);
3. each kept signature verifies with Ed25519 over the signed bytes it describes, and
   its key was the named principal's, valid when it signed (`bad_signature`,
   `unknown_key`, `key_revoked`, `wrong_principal`); unsigned records are listed;
4. every supersession, rollback and correction status is explained by a chained,
   intact correction record (`unexplained`).

Exit 0 if nothing is broken, 1 naming the first broken link, 2 for an unreadable file.
The keys are the header's `principals` unless `--keys FILE` gives the principals as JSON
from a source the auditor trusts (the header comes from the ledger being audited).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from datetime import datetime
from typing import Any

import rfc8785
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

MUTABLE = {"_id", "chain", "superseded_by", "superseded_at", "superseded_by_correction",
           "erased", "search_tokens"}
REQUEST = ["plan_id", "decision_id", "mode", "guidance", "requested_by", "claimed_by",
           "verified", "signature", "chosen_option", "requested_at", "trace_context"]
RESULTS = ["new_decision_id", "superseded_ids", "child_plans_rolled_back", "child_plans_spawned"]
RESOLUTION = ["resolved_at", "resolved_by", "resolution_signature"]
SIGNED_IN = {"decision": ("signature", "recorded_by"), "correction.request": ("signature",
             "requested_by"), "violation.report": ("report_signature", "reported_by"),
             "violation.resolution": ("resolution_signature", "resolved_by")}
ORDER = ["removed", "reordered", "bad_signature", "unknown_key", "key_revoked",
         "wrong_principal", "changed", "unchained", "unexplained"]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digests(fields: dict[str, Any]) -> dict[str, str]:
    """Each field's digest: sha256(utf8(name) || 0x00 || JCS(value)) (no salt)."""
    return {k: sha(k.encode() + b"\0" + rfc8785.dumps(v)) for k, v in fields.items()}


def kept(rec: dict[str, Any], found: dict[str, str]) -> dict[str, str]:
    """An erased field's digest is the one its record kept of the removed value."""
    erased = rec.get("erased")
    fields = erased.get("fields") if isinstance(erased, dict) else None
    if isinstance(fields, dict):
        found.update({k: v for k, v in fields.items() if k in found and isinstance(v, str)})
    return found


def event_of(line: dict[str, Any]) -> dict[str, Any] | None:
    return next((e for e in line["record"].get("history") or []
                 if e.get("event_id") == line.get("event_id")), None)


def content(line: dict[str, Any]) -> Any:
    kind, rec = line["kind"], line["record"]
    if kind == "decision":
        return {"fields": kept(rec, digests({k: v for k, v in rec.items()
                                             if k not in MUTABLE}))}
    if kind.startswith("correction."):
        event = event_of(line)
        if event is None:
            return None
        results = None
        if event.get("to_status") == "applied":
            results = {k: sorted(rec[k]) if isinstance(rec.get(k), list) else rec.get(k)
                       for k in RESULTS}
        return {"request": kept(rec, digests({k: rec.get(k) for k in REQUEST})), "event": event,
                "results": results}
    if kind == "violation.resolution":
        return {"fields": digests({k: rec.get(k) for k in RESOLUTION})}
    return {"fields": kept(rec, digests({k: v for k, v in rec.items()
                                         if k not in {"_id", "chain", "erased", *RESOLUTION}}))}


def digest_holds(line: dict[str, Any]) -> bool:
    c, link = content(line), line.get("chain")
    return c is not None and link is not None and link["digest"] == sha(rfc8785.dumps({
        "plan_id": line["plan_id"], "seq": link["seq"], "prev": link["prev"],
        "kind": line["kind"], "record_id": line["record_id"], "content": c}))


def check_plan(plan_id: str, entry: dict[str, Any], lines: list[dict[str, Any]],
               broken: list[tuple[Any, ...]]) -> None:
    expected, prev, first = entry.get("from_seq") or 0, None, True
    for ln in lines:
        link = ln.get("chain")
        if link is None:
            broken.append(("unchained", ln, "the record carries no chain link"))
            continue
        if link["seq"] > expected:
            broken.append(("removed", ln, f"no record at seq {expected} (removed)"))
        elif link["seq"] < expected:
            broken.append(("reordered", ln, f"a second record at seq {link['seq']}"))
        elif (not first or expected == 0) and link["prev"] != prev:
            broken.append(("reordered", ln, "its prev is not the digest before it"))
        expected, prev, first = link["seq"] + 1, link["digest"], False
        if not digest_holds(ln):
            broken.append(("changed", ln, "its content does not match its digest"))
    length = entry.get("chain_length")
    if (length is not None or not first) and (length != expected
                                              or entry.get("chain_head") != prev):
        broken.append(("removed" if (length or 0) > expected else "reordered",
                       {"plan_id": plan_id, "kind": "plan", "record_id": plan_id,
                        "chain": {"seq": expected}},
                       f"the plan's counter says {length} records, the chain has {expected}"))


def public_key(key: str) -> bytes:
    raw = base64.b32decode(key + "=" * (-len(key) % 8))
    if raw[0] != 20 << 3:  # a user nkey: 'U'
        raise ValueError("not a user nkey")
    return raw[1:33]


def signed_part(ln: dict[str, Any]) -> tuple[Any, Any, bool]:
    """(signature, the principal the record names, written by the ledger itself)."""
    if ln["kind"] in ("correction.retry", "correction.end"):
        event = event_of(ln) or {}
        return event.get("signature"), event.get("by"), event.get("by") is None
    sig_field, by_field = SIGNED_IN[ln["kind"]]
    rec = ln["record"]
    return rec.get(sig_field), rec.get(by_field), ln["kind"] == "decision" \
        and by_field not in rec


def ed25519_holds(sig: dict[str, Any]) -> bool:
    message = rfc8785.dumps({"purpose": "decision-ledger/v1", "kind": sig["kind"],
                             "subject": sig["subject"], "msg_id": sig["msg_id"],
                             "signed_at": sig["signed_at"], "key": sig["key"],
                             "fields": sig["fields"]})
    try:
        VerifyKey(public_key(sig["key"])).verify(
            message, base64.urlsafe_b64decode(sig["sig"] + "=" * (-len(sig["sig"]) % 4)))
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def holder(sig: dict[str, Any], keys: dict[str, tuple[str, dict[str, Any]]]
           ) -> str | tuple[str, str]:
    """The principal whose key it was, valid when it signed."""
    if sig["key"] not in keys:
        return ("unknown_key", "the key belongs to no principal")
    name, key = keys[sig["key"]]
    at = when(sig["signed_at"])
    assert at is not None
    revoked, since, until = (when(key.get(k)) for k in ("revoked_at", "valid_from",
                                                       "valid_until"))
    if (revoked and at >= revoked) or (since and at < since) or (until and at > until):
        return ("key_revoked", f"the key of {name} was not valid at {sig['signed_at']}")
    return name


def check_signature(ln: dict[str, Any], keys: dict[str, tuple[str, dict[str, Any]]]
                    ) -> str | tuple[str, str]:
    sig, by, ledger = signed_part(ln)
    if sig is None:
        return ("wrong_principal", f"names {by} without a signature") if by else (
            "ledger" if ledger else "unsigned")
    if sig.get("principal") != by:
        return ("wrong_principal", f"names {by}, its signature {sig.get('principal')}")
    if not all(isinstance(sig.get(k), str) for k in ("kind", "subject", "msg_id")):
        return "unchecked"
    if not ed25519_holds(sig):
        return ("bad_signature", "the signature does not verify")
    name = holder(sig, keys) if keys else by
    if isinstance(name, tuple) or name == by:
        return name if isinstance(name, tuple) else "signed"
    return ("wrong_principal", f"the key is {name}'s, not {by}'s")


def applied(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """correction_id -> its record, for each intact chained APPLIED end."""
    return {ln["record_id"]: ln["record"] for ln in lines
            if ln["kind"] == "correction.end" and digest_holds(ln)
            and (event_of(ln) or {}).get("to_status") == "applied"}


def supersessions(lines: list[dict[str, Any]], broken: list[tuple[Any, ...]]) -> None:
    ends = applied(lines)
    decisions = {ln["record_id"]: ln for ln in lines if ln["kind"] == "decision"}
    for did, ln in decisions.items():
        by = ln["record"].get("superseded_by")
        if by and not any(r.get("new_decision_id") == by
                          and did in (r.get("superseded_ids") or []) for r in ends.values()):
            broken.append(("unexplained", ln, f"superseded by {by}, unexplained"))
    for cid, r in ends.items():
        for did in r.get("superseded_ids") or []:
            if did in decisions and decisions[did]["record"].get("superseded_by") \
                    != r.get("new_decision_id"):
                broken.append(("unexplained", decisions[did], f"{cid} superseded it"))


def statuses(lines: list[dict[str, Any]], broken: list[tuple[Any, ...]]) -> None:
    last: dict[str, dict[str, Any]] = {}
    for ln in lines:
        if ln["kind"].startswith("correction.") and ln.get("chain") and (
                ln["record_id"] not in last
                or ln["chain"]["seq"] > last[ln["record_id"]]["chain"]["seq"]):
            last[ln["record_id"]] = ln
    for ln in last.values():
        status, chained = ln["record"].get("status"), (event_of(ln) or {}).get("to_status")
        if (status in ("applied", "failed", "cancelled") or ln["kind"] == "correction.end") \
                and status != chained:
            broken.append(("unexplained", ln, f"status {status}, chain ends {chained}"))


def explained(plans: dict[str, Any], own: list[dict[str, Any]], every: list[dict[str, Any]],
              broken: list[tuple[Any, ...]]) -> None:
    everywhere = applied(every)
    for plan_id, entry in plans.items():
        lines = [ln for ln in own if ln["plan_id"] == plan_id]
        supersessions(lines, broken)
        statuses(lines, broken)
        by = entry.get("rolled_back_by")
        if entry.get("status") == "rolled_back" and plan_id not in (
                everywhere.get(by, {}).get("child_plans_rolled_back") or []):
            broken.append(("unexplained", {"plan_id": plan_id, "kind": "plan",
                                           "record_id": plan_id}, f"rolled back by {by}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export")
    ap.add_argument("--keys", help="principals as JSON (the header's shape), trusted")
    args = ap.parse_args()
    try:
        with open(args.export, encoding="utf-8") as f:
            header, *lines = [json.loads(x) for x in f if x.strip()]
        principals = header["principals"]
        if args.keys:
            with open(args.keys, encoding="utf-8") as f:
                principals = json.load(f)
    except (OSError, ValueError, KeyError) as exc:
        print(f"unreadable export: {exc}", file=sys.stderr)
        return 2
    keys = {k["public"]: (p["name"], k) for p in principals for k in p["keys"]}
    plans = header.get("plans") or {}
    own = [ln for ln in lines if not ln.get("witness")]
    broken: list[tuple[Any, ...]] = []
    for plan_id, entry in plans.items():
        check_plan(plan_id, entry, [ln for ln in own if ln["plan_id"] == plan_id], broken)
    tally: dict[str, int] = {}
    for ln in own:
        got = check_signature(ln, keys)
        if isinstance(got, tuple):
            broken.append((got[0], ln, got[1]))
        else:
            tally[got] = tally.get(got, 0) + 1
    explained(plans, own, lines, broken)
    rank = list(plans)
    broken.sort(key=lambda b: (rank.index(b[1]["plan_id"]) if b[1]["plan_id"] in rank else 99,
                               (b[1].get("chain") or {}).get("seq", 1 << 62),
                               ORDER.index(b[0])))
    print(f"{len(plans)} plan(s), {len(own)} record(s): " + ", ".join(
        f"{n} {what}" for what, n in sorted(tally.items())))
    if not broken:
        print("chain intact")
        return 0
    for rule, ln, why in broken[:20]:
        seq = (ln.get("chain") or {}).get("seq")
        print(f"{rule}: plan {ln['plan_id']} seq {seq} {ln['kind']} {ln['record_id']}: {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
