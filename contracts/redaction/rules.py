"""What redaction looks for in free text: the built-in detectors and an operator's own
patterns, compiled once into one scanner (docs/retention.md, Redaction).

Built in, each a named rule (what a record's `redactions` says, never the value):

    api_key  keys and tokens by their published prefixes: OpenAI/Anthropic `sk-`,
             GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/`github_pat_`, AWS `AKIA`/`ASIA`,
             Slack `xoxb-`/`xoxp-`/`xoxa-`/`xoxr-`/`xoxs-`, Google `AIza`, Stripe
             `sk_live_`/`rk_live_`
    jwt      three base64url parts, the first two JSON objects (`eyJ`)
    email    an e-mail address
    card     13 to 19 digits (spaces or dashes between) whose Luhn checksum holds, so an
             order number or a timestamp is left alone, and standing on their own: not
             part of a longer run of letters, digits, `_` or `-` (an identifier: a UUID's
             digit groups, such as a LangGraph checkpoint's in an `actor_state_ref`, pass
             Luhn now and then, 0.58 % of checkpoint IDs, and redacting them broke
             the reference a resume parses)

Why one scanner: the recorder runs it on every decision, so the text is scanned once by
one compiled alternation (with bounded repetitions, so no input makes it backtrack
without end) and a text it finds nothing in costs one `search`. An operator's pattern is
an ordinary Python regular expression, named (`REDACTION_PATTERNS`, a JSON object of
name to pattern); it is compiled at start, so a bad one stops the start in one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

API_KEY = (r"(?<![A-Za-z0-9_-])(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,200}"
           r"|gh[pousr]_[A-Za-z0-9]{30,100}|github_pat_[A-Za-z0-9_]{22,200}"
           r"|(?:AKIA|ASIA)[0-9A-Z]{16}|xox[bpars]-[A-Za-z0-9-]{10,200}"
           r"|AIza[0-9A-Za-z_-]{35}|[sr]k_live_[0-9A-Za-z]{16,200})")
JWT = r"eyJ[A-Za-z0-9_-]{8,4000}\.eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{16,4000}"
EMAIL = (r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@"
         r"(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])")
CARD = r"(?<![0-9A-Za-z_-])[0-9](?:[ -]?[0-9]){12,18}(?![0-9A-Za-z_-])"

BUILT_IN: dict[str, str] = {"api_key": API_KEY, "jwt": JWT, "email": EMAIL, "card": CARD}
"""The detectors on by default, in the order they are tried at one place."""
LITERALS: dict[str, tuple[str, ...]] = {
    "api_key": ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA",
                "xox", "AIza", "k_live_"),
    "jwt": ("eyJ",), "email": ("@",)}
"""What a text must contain for a built-in detector to match in it: checked first with
`in` (a C substring search), so the common text pays no regular expression at all."""
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_PATTERNS = 50
MAX_PATTERN_CHARS = 1000


def luhn(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only) holds."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_number(text: str) -> bool:
    digits = text.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and luhn(digits)


def placeholder(rule: str) -> str:
    """What replaces a match: names the rule, never the value."""
    return f"[redacted:{rule}]"


@dataclass(frozen=True)
class Rules:
    """The detectors in force, compiled: built-in names (a subset of BUILT_IN) and the
    operator's own (name, pattern) pairs. `Rules.off()` redacts nothing."""

    built_in: tuple[str, ...] = tuple(BUILT_IN)
    custom: tuple[tuple[str, str], ...] = ()
    scanner: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    checks: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = [(name, BUILT_IN[name]) for name in self.built_in] + list(self.custom)
        groups = [f"(?P<r{i}>{pattern})" for i, (_, pattern) in enumerate(parts)]
        object.__setattr__(self, "names", tuple(name for name, _ in parts))
        object.__setattr__(self, "scanner", re.compile("|".join(groups)) if groups else None)
        object.__setattr__(self, "checks", tuple(
            (LITERALS.get(name, ()), re.compile(pattern)) for name, pattern in parts))

    def may_match(self, text: str) -> bool:
        """Whether any detector may match in `text`: each one's literals first, then its
        own pattern (a hit is then scanned again by `scanner`, which says which)."""
        for literals, pattern in self.checks:
            if literals and not any(lit in text for lit in literals):
                continue
            if pattern.search(text) is not None:
                return True
        return False

    @classmethod
    def off(cls) -> Rules:
        return cls(built_in=(), custom=())

    @classmethod
    def configured(cls, built_in: str | None, patterns: Mapping[str, object] | None
                   ) -> Rules:
        """From the settings: `built_in` a comma-separated list of BUILT_IN names (None:
        all; empty: none), `patterns` name -> regular expression. ValueError (one line)
        naming what is wrong."""
        names = tuple(BUILT_IN) if built_in is None else tuple(
            n.strip() for n in built_in.split(",") if n.strip())
        unknown = [n for n in names if n not in BUILT_IN]
        if unknown:
            raise ValueError(f"REDACTION_DETECTORS: unknown detector {unknown[0]!r} "
                             f"(known: {', '.join(BUILT_IN)})")
        return cls(built_in=names, custom=_custom(patterns or {}))

    def replace(self, match: re.Match[str]) -> str:
        """The placeholder for one match (a card number failing Luhn stays)."""
        rule = self.rule_of(match)
        if rule == "card" and not card_number(match.group(0)):
            return match.group(0)
        return placeholder(rule)

    def rule_of(self, match: re.Match[str]) -> str:
        group = match.lastgroup or "r0"
        return self.names[int(group[1:])]


def _custom(patterns: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"REDACTION_PATTERNS: at most {MAX_PATTERNS} patterns")
    found: list[tuple[str, str]] = []
    for name, pattern in patterns.items():
        if not NAME.fullmatch(name) or name in BUILT_IN:
            raise ValueError(f"REDACTION_PATTERNS: name {name[:40]!r} must be lower-case "
                             "letters, digits and _ (40 at most) and not a built-in's")
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"REDACTION_PATTERNS: {name}: a pattern of 1 to "
                             f"{MAX_PATTERN_CHARS} characters")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"REDACTION_PATTERNS: {name}: {exc}") from None
        if compiled.search(""):
            raise ValueError(f"REDACTION_PATTERNS: {name}: matches the empty text")
        # Named groups would clash in the one alternation: made plain groups.
        found.append((name, re.sub(r"\(\?P<[^>]+>", "(?:", pattern)
                      if compiled.groupindex else pattern))
    return tuple(found)
