"""How a scenario's run ended: one table for every engine, each code with
one meaning (what a per-scenario kernel returns or writes to ``status``)."""

from typing import NamedTuple


class Status(NamedTuple):
    """A scenario's outcome: its code (what the kernel returns) and message."""

    code: int
    message: str


STATUS_OK = 0
STATUS_MAX_ITER = 1
STATUS_UNSUPPORTED_PAIR = 2
STATUS_STALLED = 3
STATUS_OVERFLOW = 4
#: The scenario statuses, by code.
STATUSES = (
    Status(STATUS_OK, "ok"),
    Status(STATUS_MAX_ITER, "event loop exceeded its iteration limit"),
    Status(STATUS_UNSUPPORTED_PAIR, "a pair of shapes has no contact function"),
    Status(STATUS_STALLED, "too many events at one instant (contact chatter)"),
    Status(STATUS_OVERFLOW, "more contact points than the scenario's capacity"),
)
STATUS_MESSAGES = tuple(s.message for s in STATUSES)
assert all(s.code == k for k, s in enumerate(STATUSES))


def check(status, time, names=None):
    """Raise ``RuntimeError`` naming the first scenario whose ``status`` is
    not ok (its name from ``names``, else its index), its message, the time
    it stopped at and how many failed."""
    import numpy as np

    bad = np.flatnonzero(np.asarray(status) != STATUS_OK)
    if bad.size:
        s = int(bad[0])
        name = names[s] if names else s
        raise RuntimeError(f"scenario {name!r}: {STATUS_MESSAGES[status[s]]} "
                           f"(stopped at t = {time[s]}); {bad.size} scenario(s) failed")
