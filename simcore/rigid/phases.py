"""The time-steppers' contact phases, logged as events.

A time-stepped contact is a phase, not an instant: a pair (a body and
another body, a wall or the ground) touches at the start of some step (it
has a contact point, :func:`simcore.rigid.rigid_engine.detect`) and stops
touching at the start of a later one.  :func:`log` writes a ``start`` row
when a phase begins and an ``end`` row when it ends
(:mod:`simcore.kernel.events`: ``body-ground start`` ... ``body-body end``);
the end row carries the phase's totals, summed over its steps from the
impulse each contact point gave its body ``a`` in the step (the penalty
stepper's ``h fn n`` plus its friction impulse; the Moreau-Jean stepper's
LCP impulses):

- ``jn``: the normal impulse (each point's along its own normal) [N s];
- ``jt``: the length of the summed tangential impulse (each step's off its
  point's normal) [N s];
- ``dva = J / m_a`` and ``dvb = -J / m_b`` [m/s] (``J`` the summed impulse
  on ``a``; ``dvb`` 0 for a plane or a fixed body): the centres of mass'
  velocity change the contact gave;
- ``normal``: the impulse-weighted mean normal, from ``a`` to ``b`` (a
  plane's own normal, into its free side, for a wall or the ground).

A start row has the normal of the pair's first point and no impulse.  A
body-body pair is logged once, with ``a`` the lower index.  Bodies asleep
(the Moreau-Jean stepper) keep their contacts and log nothing until they
wake.  ``slip`` is -1 (not an impact) on every row.
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import jit
from ..kernel.eventlog import EventLog
from ..kernel.eventlog import log as append
from ..kernel.events import EV_PHASE_END, EV_PHASE_START, NA


class Phases(NamedTuple):
    """A scenario's contact phases, per pair ``(body a, partner p)`` with
    ``p`` the other body's index or ``nb + plane`` (plane 0 the ground,
    ``1 + k`` wall ``k``): ``on (nb, P)`` the pair touched at the last step's
    start; ``now (nb, P)`` scratch; ``imp (nb, P, 3)`` the impulse on ``a``
    so far; ``jn (nb, P)`` the normal impulse so far; ``nrm (nb, P, 3)`` the
    impulse-weighted normal so far; ``tan (nb, P, 3)`` the tangential impulse
    so far (each step's off its point's normal); ``point (C, 3)``: scratch
    for a stepper's impulses at the contact points; ``row (4, 3)``: scratch
    of a row's vectors (zero, normal, dva, dvb); ``no_t (0, 0)``, ``no_dv
    (0, 3, 0)``: the log's tangents (none); ``active (1,)``: how many pairs
    are on (:func:`idle`)."""

    on: np.ndarray
    now: np.ndarray
    imp: np.ndarray
    jn: np.ndarray
    nrm: np.ndarray
    tan: np.ndarray
    point: np.ndarray
    row: np.ndarray
    no_t: np.ndarray
    no_dv: np.ndarray
    active: np.ndarray


@jit
def phases(nb, nplane, cap):
    """The :class:`Phases` of ``nb`` bodies, ``nplane`` planes and ``cap``
    contact points, no pair touching."""
    p = nb + nplane
    return Phases(np.zeros((nb, p), np.bool_), np.zeros((nb, p), np.bool_),
                  np.zeros((nb, p, 3)), np.zeros((nb, p)), np.zeros((nb, p, 3)),
                  np.zeros((nb, p, 3)), np.zeros((max(cap, 1), 3)), np.zeros((4, 3)),
                  np.zeros((0, 0)), np.zeros((0, 3, 0)), np.zeros(1, np.int64))


@jit(borrow=True)
def _kind_of(nb, p):
    """The kind offset of partner ``p`` and the event's ``b``: the body, the
    wall's index, or -1 for the ground."""
    if p < nb:
        return 0, p
    if p == nb:
        return 2, NA
    return 1, p - nb - 1


@jit(borrow=True)
def idle(ph, pts):
    """No pair is on and no point touches: a step with nothing to log."""
    return ph.active[0] == 0 and pts.count[0] == 0


@jit(borrow=True)
def log(ph, b, pts, point, t, f, i, count):
    """The phases at the step starting at ``t``, whose contact points are
    ``pts`` and impulses ``point (C, 3)`` (on ``pts.i``): begin the pairs
    that touch anew (a start row), add the step's impulses, end the pairs
    that stopped (an end row with the totals); ``b`` the bodies
    (:class:`simcore.rigid.rigid_engine.Bodies`), rows into the log ``f``,
    ``i`` (:class:`simcore.kernel.eventlog.EventLog`'s arrays) from
    ``count``.  Returns the new count."""
    nb = b.count
    ev = EventLog(f, i, ph.no_t, ph.no_dv, ph.no_dv)
    zero = ph.row[0]
    ph.now[:, :] = False
    for c in range(pts.count[0]):
        a, p, off = pts.i[c], 0, 0
        flip = 1.0  # the point's normal and impulse are on pts.i: flipped when a is pts.j
        if pts.plane[c] >= 0:
            p, off = nb + pts.plane[c], 2 if pts.plane[c] == 0 else 1
        elif pts.j[c] < a:
            a, p, flip = pts.j[c], pts.i[c], -1.0
        else:
            p = pts.j[c]
        side = flip if p >= nb else -flip  # the event's normal: a to b, or the plane's
        n = pts.normal[c]
        if not ph.on[a, p] and not ph.now[a, p]:
            ph.imp[a, p, :] = 0.0
            ph.nrm[a, p, :] = 0.0
            ph.tan[a, p, :] = 0.0
            ph.jn[a, p] = 0.0
            count = append(ev, count, t, EV_PHASE_START + off, a, _kind_of(nb, p)[1],
                           (side * n[0] + 0.0, side * n[1] + 0.0, side * n[2] + 0.0), 0.0, 0.0,
                           zero, zero, NA)
        ph.now[a, p] = True
        J = point[c]
        jn = J[0] * n[0] + J[1] * n[1] + J[2] * n[2]  # (flip twice: the same on a)
        ph.jn[a, p] += jn
        for d in range(3):
            ph.imp[a, p, d] += flip * J[d]
            ph.nrm[a, p, d] += side * jn * n[d]
            ph.tan[a, p, d] += flip * (J[d] - jn * n[d])
    active = 0
    for a in range(nb):
        for p in range(ph.on.shape[1]):
            if ph.on[a, p] and not ph.now[a, p]:
                count = _end(ph, b, ev, count, t, a, p)
            ph.on[a, p] = ph.now[a, p]
            active += ph.now[a, p]
    ph.active[0] = active
    return count


@jit(borrow=True)
def _end(ph, b, ev, count, t, a, p):
    """The end row of pair ``(a, p)`` at ``t``; returns the new count."""
    nb = b.count
    off, other = _kind_of(nb, p)
    J = ph.imp[a, p]
    size = np.sqrt(ph.nrm[a, p, 0] ** 2 + ph.nrm[a, p, 1] ** 2 + ph.nrm[a, p, 2] ** 2)
    n, dva, dvb = ph.row[1], ph.row[2], ph.row[3]
    jt = np.sqrt(ph.tan[a, p, 0] ** 2 + ph.tan[a, p, 1] ** 2 + ph.tan[a, p, 2] ** 2)
    for d in range(3):
        n[d] = ph.nrm[a, p, d] / size if size > 0.0 else 0.0
        dva[d] = J[d] * b.inv_mass[a]
        dvb[d] = -J[d] * b.inv_mass[p] if p < nb else 0.0
    return append(ev, count, t, EV_PHASE_END + off, a, other, (n[0], n[1], n[2]), ph.jn[a, p],
                  jt, dva, dvb, NA)
