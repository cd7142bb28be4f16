"""Machine-checkable conditions: CEL expressions over one decision, and their bounds.

An invariant may carry `check`, a Common Expression Language expression that is true
while the decision keeps the invariant (`!(decision_type == "tool_invocation" &&
tool.name == "shell")`). The expression is compiled by `common-expression-language`
(the Rust `cel` crate): no `eval`, no parser of ours, and no Python reachable from an
expression (no function is registered besides CEL's own).

The library has no cost limit, so the bounds are ours, checked when the invariant is
added and again when it is read back (docs/decisions/0033-checked-invariants-and-gates.md):

- at most `MAX_CHECK_CHARS` characters (its evaluator recurses per operator: a
  20,000-term sum crashes the process; 1,000 characters cannot come near);
- at most `MAX_COMPREHENSIONS` comprehension macro (`all`, `exists`, `exists_one`,
  `map`, `filter`), counted as words outside plain string literals, and counted
  everywhere when the expression has a triple-quoted or raw literal: a count that errs
  only upwards, so nested loops (quadratic in the data) cannot be written;
- only the variables of `CHECK_VARIABLES` and CEL's standard functions (`FUNCTIONS`);
- it gives true or false on a sample decision (an undefined name, or a number where a
  truth value belongs, is refused here rather than on every decision).

The data an expression sees is bounded too (contracts.invariants.activation), so one
evaluation stays within tens of milliseconds whatever an agent sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contracts.invariants.model import MAX_CHECK_CHARS

if TYPE_CHECKING:
    import cel

MAX_COMPREHENSIONS = 1

CHECK_VARIABLES: dict[str, str] = {
    "decision_type": "the decision's type, e.g. \"tool_invocation\"",
    "question": "its question",
    "chosen_option": "its chosen option",
    "alternatives": "the alternatives considered (list of strings)",
    "confidence": "its confidence_score (double), or null",
    "artifacts": "the paths of the artifacts it produced (list of strings)",
    "resources": "the resources in its context: list of {\"id\", \"path\"} (path may be null)",
    "paths": "artifact paths, then resource paths (list of strings)",
    "tool": "{\"name\", \"arguments\"} of a tool_invocation ({\"name\": \"\", \"arguments\": {}} "
            "when it names none)",
    "path": "the decision types from the plan's root down to its parent (list of strings)",
    "project": "the plan's project, or null",
    "action_template": "the plan's action template, or null",
}
"""Every name an expression may use, with what it holds."""

FUNCTIONS = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double",
    "string", "bytes", "bool", "dyn", "type", "timestamp", "duration", "max", "min"})
"""CEL's standard functions; operators (`_+_`, `@in`, `!_`, ...) are allowed too."""

_COMPREHENSION = re.compile(r"\b(?:all|exists|exists_one|map|filter)\b")
_PLAIN_LITERAL = re.compile(r"'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"")
_UNUSUAL_LITERAL = re.compile(r"'''|\"\"\"|(?<![\w.])[rRbB]{1,2}['\"]")
_UNDEFINED = "Undefined variable or function"

SAMPLE: dict[str, Any] = {
    "decision_type": "tool_invocation", "question": "Which tool?", "chosen_option": "run it",
    "alternatives": ["skip it"], "confidence": 0.5, "artifacts": ["sample/file.txt"],
    "resources": [{"id": "sample", "path": "sample/file.txt"}],
    "paths": ["sample/file.txt", "sample/file.txt"],
    "tool": {"name": "sample", "arguments": {}}, "path": ["prompt_definition"],
    "project": "sample", "action_template": "sample"}
"""A decision every expression is tried on when it is added."""


class InvalidCheck(ValueError):
    """An expression refused: the message is one line an operator can act on."""


@dataclass(frozen=True, eq=False)
class CompiledCheck:
    """An expression compiled once, with the variables it reads."""

    source: str
    program: cel.Program = field(repr=False)
    variables: frozenset[str]
    """Of CHECK_VARIABLES, those the expression names (the only ones built for it)."""


def compile_check(source: str) -> CompiledCheck:
    """The expression compiled, or InvalidCheck saying why it is refused."""
    text = source.strip()
    if not text:
        raise InvalidCheck("a check is a CEL expression; got an empty one")
    if len(text) > MAX_CHECK_CHARS:
        raise InvalidCheck(f"a check is at most {MAX_CHECK_CHARS} characters; "
                           f"this one is {len(text)}")
    loops = comprehension_count(text)
    if loops > MAX_COMPREHENSIONS:
        raise InvalidCheck(
            f"a check may use at most {MAX_COMPREHENSIONS} of all/exists/exists_one/map/filter "
            f"(it has {loops}): nested loops over an agent's lists are unbounded work; "
            "split it into two invariants, or use `paths` for artifacts and resources at once")
    import cel  # on the first check compiled: see _try_on_sample

    try:
        program = cel.compile(text)
    except Exception as exc:  # the library's parse error: a ValueError with the position
        raise InvalidCheck(f"not a CEL expression: {_parse_error(exc)}") from None
    _check_names(program)
    _try_on_sample(program)
    names = frozenset(program.variables()) & CHECK_VARIABLES.keys()
    return CompiledCheck(text, program, names)


def comprehension_count(text: str) -> int:
    """How many comprehension macros `text` may hold, never fewer than it does: words in
    plain string literals are not counted, but all words are when the text has a literal
    whose end a simple scan could misjudge (triple quotes, raw or bytes prefixes)."""
    scanned = text if _UNUSUAL_LITERAL.search(text) else _PLAIN_LITERAL.sub("''", text)
    return len(_COMPREHENSION.findall(scanned))


def _check_names(program: cel.Program) -> None:
    unknown = sorted(f for f in program.functions()
                     if f not in FUNCTIONS and not f.startswith(("_", "@", "!", "-")))
    if unknown:
        raise InvalidCheck(f"unknown function {unknown[0]!r}; a check may call "
                           f"{', '.join(sorted(FUNCTIONS))}")


def _try_on_sample(program: cel.Program) -> None:
    # Imported where a check is compiled or run, not with this module: the package loads
    # its command-line interface on import (a quarter of a second in every process that
    # imports the invariants, most of which never compile a check).
    import cel

    try:
        result = program.execute(cel.Context(SAMPLE))
    except RuntimeError as exc:
        if _UNDEFINED in str(exc):
            raise InvalidCheck(f"{_first_line(exc).split('. ')[0]}; a check may use "
                               f"{', '.join(CHECK_VARIABLES)}") from None
        return  # data-dependent (a missing key, a bad argument): judged per decision
    except Exception:
        return
    if not isinstance(result, bool):
        raise InvalidCheck(f"a check gives true or false; on a sample decision this one "
                           f"gives {type(result).__name__} {str(result)[:40]!r}")


def _parse_error(exc: BaseException) -> str:
    """The parser's first complaint, with its position, without the echoed source."""
    text = _first_line(exc)
    at = text.find("ERROR: <input>:")
    return text[at + len("ERROR: <input>:"):].split(" | ")[0] if at >= 0 else text


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300]
