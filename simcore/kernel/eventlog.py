"""A scenario's event log and trajectory residual sums, as every event
engine's kernels write them (columns in :mod:`simcore.kernel.events`)."""

from typing import NamedTuple

import numpy as np

from .config import jit
from .events import (
    EVF_DVA,
    EVF_DVB,
    EVF_JN,
    EVF_JT,
    EVF_N,
    EVF_T,
    EVI_A,
    EVI_B,
    EVI_KIND,
    EVI_SLIP,
)


class EventLog(NamedTuple):
    """A scenario's event log: ``f (cap, EVF_WIDTH)``, ``i (cap, EVI_WIDTH)``
    (columns in :mod:`simcore.kernel.events`) and the tangents ``tt (cap, NT)``,
    ``tdva``, ``tdvb (cap, 3, NT)``."""

    f: np.ndarray
    i: np.ndarray
    tt: np.ndarray
    tdva: np.ndarray
    tdvb: np.ndarray


class Sums(NamedTuple):
    """Trajectory residual sums: ``sse (1,)``, ``grad (NT,)``, ``gn (NT, NT)``."""

    sse: np.ndarray
    grad: np.ndarray
    gn: np.ndarray


@jit(borrow=True)
def log(ev, count, t, kind, a, b, n, jn, jt, dva, dvb, slip):
    """Append one event to the log ``ev`` (:class:`EventLog`) if it has
    room; return the new count."""
    ev_f, ev_i = ev.f, ev.i
    if count < ev_f.shape[0]:
        ev_f[count, EVF_T] = t
        ev_f[count, EVF_JN] = jn
        ev_f[count, EVF_JT] = jt
        for d in range(3):
            ev_f[count, EVF_N + d] = n[d]
            ev_f[count, EVF_DVA + d] = dva[d]
            ev_f[count, EVF_DVB + d] = dvb[d]
        ev_i[count, EVI_KIND] = kind
        ev_i[count, EVI_A] = a
        ev_i[count, EVI_B] = b
        ev_i[count, EVI_SLIP] = slip
    return count + 1


@jit(borrow=True)
def log_tangent(ev_tt, ev_tdva, ev_tdvb, count, ttau, tdva, tdvb):
    """Store the tangents of the event just logged (``count`` is the new count)."""
    k = count - 1
    if k < ev_tt.shape[0]:
        for p in range(ttau.shape[0]):
            ev_tt[k, p] = ttau[p]
            for d in range(3):
                ev_tdva[k, d, p] = tdva[d, p]
                ev_tdvb[k, d, p] = tdvb[d, p]
