"""Event kinds and the per-scenario event log.

Every event the engine logs has one :class:`EventKind`; the kernels write
its integer value, users see its label (``EVENT_KINDS[kind]``).  A new kind
is a new member here (with its label) and the stage that logs it.

The log of one scenario is an :class:`EventLog` record of arrays with room
for ``cap`` events; :func:`log_event` appends one row (and counts rows past
the capacity, so an overflowing scenario can be re-run with room for all).

Fields of a row (SI units, world frame):

``t``        time [s]
``kind``     :class:`EventKind` value
``a``, ``b`` the body; the other body, the wall index, or -1 (ground, stop, start)
``n (3,)``   normal from a to b, the plane's normal, or the sliding direction (start)
``jn``, ``jt`` normal and tangential impulse [N s]
``dva``, ``dvb (3,)`` velocity change of a and b [m/s]
``slip``     1 slipped, 0 stuck, -1 not an impact
``tt (NT,)``, ``tdva``, ``tdvb (3, NT)`` the tangents of ``t``, ``dva``, ``dvb``
"""

import enum
from typing import NamedTuple

import numpy as np

from .config import jit


class EventKind(enum.IntEnum):
    """What happened (the integer the kernels log)."""

    BODY_BODY = 0
    BODY_WALL = 1
    BODY_GROUND = 2
    STOP = 3
    START = 4


#: The label of each kind, by value (what tables and reports show).
EVENT_KINDS = ("body-body", "body-wall", "body-ground", "stop", "start")
#: The kinds that are impacts (an impulse between a body and a surface).
IMPACT_KINDS = (EventKind.BODY_BODY, EventKind.BODY_WALL, EventKind.BODY_GROUND)
#: The fields of an event as :meth:`simcore.engine.SimResult.events` returns them.
EVENT_FIELDS = ("t", "kind", "a", "b", "normal", "jn", "jt", "dva", "dvb", "slip")

assert len(EVENT_KINDS) == len(EventKind)


def is_impact(kind):
    """Boolean mask (or bool) of the impact kinds among ``kind`` values."""
    return np.isin(kind, np.array(IMPACT_KINDS, np.int64))


class EventLog(NamedTuple):
    """One scenario's event buffers (capacity ``cap``; see the module docstring).

    ``count (1,)`` holds the number of events logged so far, which may
    exceed ``cap``: the rows past it were not written.
    """

    t: np.ndarray
    kind: np.ndarray
    a: np.ndarray
    b: np.ndarray
    n: np.ndarray
    jn: np.ndarray
    jt: np.ndarray
    dva: np.ndarray
    dvb: np.ndarray
    slip: np.ndarray
    tt: np.ndarray
    tdva: np.ndarray
    tdvb: np.ndarray
    count: np.ndarray


def buffers(nscen, cap, nt):
    """Event buffers for ``nscen`` scenarios: an :class:`EventLog` of
    ``(nscen, cap, ...)`` arrays (``count (nscen,)``)."""
    return EventLog(np.empty((nscen, cap)), np.empty((nscen, cap), np.int64),
                    np.empty((nscen, cap), np.int64), np.empty((nscen, cap), np.int64),
                    np.empty((nscen, cap, 3)), np.empty((nscen, cap)), np.empty((nscen, cap)),
                    np.empty((nscen, cap, 3)), np.empty((nscen, cap, 3)),
                    np.empty((nscen, cap), np.int64), np.zeros((nscen, cap, nt)),
                    np.zeros((nscen, cap, 3, nt)), np.zeros((nscen, cap, 3, nt)),
                    np.zeros(nscen, np.int64))


@jit
def scenario_log(ev, s):
    """Scenario ``s``'s rows of batch buffers ``ev`` (as :func:`buffers` makes them)."""
    return EventLog(ev.t[s], ev.kind[s], ev.a[s], ev.b[s], ev.n[s], ev.jn[s], ev.jt[s],
                    ev.dva[s], ev.dvb[s], ev.slip[s], ev.tt[s], ev.tdva[s], ev.tdvb[s],
                    ev.count[s:s + 1])


@jit
def log_event(ev, t, kind, a, b, n, jn, jt, dva, dvb, slip):
    """Append one event if the log has room; the count grows either way."""
    k = ev.count[0]
    if k < ev.t.shape[0]:
        ev.t[k] = t
        ev.kind[k] = kind
        ev.a[k] = a
        ev.b[k] = b
        for d in range(3):
            ev.n[k, d] = n[d]
            ev.dva[k, d] = dva[d]
            ev.dvb[k, d] = dvb[d]
        ev.jn[k] = jn
        ev.jt[k] = jt
        ev.slip[k] = slip
    ev.count[0] = k + 1


@jit
def log_tangent(ev, ttau, tdva, tdvb):
    """Store the tangents of the event just logged (its time's ``ttau (NT,)``,
    the velocity changes' ``tdva``, ``tdvb (3, NT)``)."""
    k = ev.count[0] - 1
    if k < ev.tt.shape[0]:
        for p in range(ttau.shape[0]):
            ev.tt[k, p] = ttau[p]
            for d in range(3):
                ev.tdva[k, d, p] = tdva[d, p]
                ev.tdvb[k, d, p] = tdvb[d, p]
