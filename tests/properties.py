"""How many examples a property test tries: a quarter in the default run, all in the
deep one.

The default run (`scripts/test`) is the one a developer waits for, and the handful of
properties that asked for hundreds of examples each were a tenth of its test time; a
quarter of them (never fewer than 25) still walks every strategy's shapes on every run,
with Hypothesis's database replaying what once failed. `--hypothesis-profile=deep`
(a line of its own in .ci/run) tries every example each test asks for, and ten times
Hypothesis's usual hundred for the tests that name no count.
"""

from __future__ import annotations

from hypothesis import settings

DEFAULT = "ledger"
DEEP = "deep"


def register() -> None:
    """No per-example deadline in either: it is a timing assertion, and on a loaded
    2-core machine the first example of a property (imports, caches) took 460 ms
    against Hypothesis' 200 ms."""
    settings.register_profile(DEFAULT, deadline=None)
    settings.register_profile(DEEP, deadline=None, max_examples=1000)
    settings.load_profile(DEFAULT)


def examples(deep: int) -> int:
    """`deep` examples under the deep profile, a quarter of them (at least 25) otherwise.
    Read when the test module is imported, after the command line chose the profile."""
    if settings.get_current_profile_name() == DEEP:
        return deep
    return max(25, deep // 4)
