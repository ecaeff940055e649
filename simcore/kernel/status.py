"""How a scenario's run ended: one table for every engine, each code with
one meaning (what a per-scenario kernel returns or writes to ``status``)."""

from typing import NamedTuple

from .config import jit


class Status(NamedTuple):
    """A scenario's outcome: its code (what the kernel returns) and message."""

    code: int
    message: str


STATUS_OK = 0
STATUS_MAX_ITER = 1
STATUS_UNSUPPORTED_PAIR = 2
STATUS_STALLED = 3
STATUS_OVERFLOW = 4
STATUS_LCP_FAILED = 5
STATUS_IMPACT_JAM = 6
STATUS_SLIP_TURNS = 7
STATUS_ONE_POINT = 8
STATUS_UNKNOWN_LAW = 9
STATUS_SWEEPS = 10
#: The scenario statuses, by code.
STATUSES = (
    Status(STATUS_OK, "ok"),
    Status(STATUS_MAX_ITER, "event loop exceeded its iteration limit"),
    Status(STATUS_UNSUPPORTED_PAIR, "a pair of shapes has no contact function"),
    Status(STATUS_STALLED, "contact chatter: 100000 passes of the event loop within 1 ms of "
           "simulated time (a stick-slip or impact cycle the engine does not resolve)"),
    Status(STATUS_OVERFLOW, "more contact points than the scenario's capacity"),
    Status(STATUS_LCP_FAILED, "the impact's complementarity problem has no solution Lemke's "
           "pivots reach (a ray), or it is larger than the solver's bound"),
    Status(STATUS_IMPACT_JAM, "the normal velocity does not grow under the friction impulse "
           "(Painleve's jam): no impulse of the law resolves this contact (Stronge's "
           "energetic law at an impact; a Moreau-Jean step's contact on the elliptic cone)"),
    Status(STATUS_SLIP_TURNS, "stronge_energetic needs a slip direction that cannot turn "
           "(planar motion or an isotropic contact); this contact couples the tangents"),
    Status(STATUS_ONE_POINT, "stronge_energetic takes an impact at one contact point"),
    Status(STATUS_UNKNOWN_LAW, "a law code without an impact map"),
    Status(STATUS_SWEEPS, "the contact problem of a step (bodies touching each other, or a "
           "body's contacts its pivots could not solve) was not solved within the Gauss-Seidel "
           "sweeps allowed (a tall stack kept awake: try a smaller step)"),
)
STATUS_MESSAGES = tuple(s.message for s in STATUSES)
assert all(s.code == k for k, s in enumerate(STATUSES))

#: An event loop that makes this many passes while its time moves by less
#: than ``CHATTER_SPAN`` [s] is stalled (``STATUS_STALLED``): contacts that
#: start and stop, or touch and part, nanoseconds apart, which no measured
#: scene does (the event engines' passes come at events, window edges and
#: ``dt`` grid steps, so only a step under 10 ns would look the same).
#: Checked in blocks of passes, so it ends such a run within two blocks
#: instead of after ``MAX_LOOP`` passes (minutes).
CHATTER_PASSES = 100_000
CHATTER_SPAN = 1e-3


@jit(inline="always")
def progress(passes, since, t):
    """One more pass of an event loop now at time ``t``: ``(passes, since,
    stalled)``, where the block of passes counted since time ``since``
    restarts every :data:`CHATTER_PASSES` passes, and ``stalled`` says that
    the block just ended took less than :data:`CHATTER_SPAN`."""
    passes += 1
    if passes < CHATTER_PASSES:
        return passes, since, False
    return 0, t, t - since < CHATTER_SPAN


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
