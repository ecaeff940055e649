"""Measured impacts through the rigid impact maps: a batch of events, each a
body striking fixed surfaces, in parallel (``prange`` over events).

An event ``k`` is one body with inverse mass matrix ``ev_inv_mass[k] (6, 6)``
(world frame, about its centre of mass: ``diag(1/m I, I_world^-1)``), its
free velocity ``ev_vel[k] (6,)`` (the velocity just before plus the other
forces' impulse over the interval to the sample after: gravity ``h g``) and
its contacts ``ev_cptr[k]:ev_cptr[k + 1]`` of ``c_arm``, ``c_normal (C, 3)``
(conventions of :mod:`simcore.laws.impact_maps`), under the law code
``ev_law[k]``.  Each contact reads its friction and restitution from the
coefficient vector at ``c_mu``, ``c_e (C,)`` (indices the caller takes from
the coefficient layout: the contact kind's and material's entries).

Directions: ``dirs (P, nt)`` the tangent of every coefficient along each of
``nt`` directions, and, with ``state=True``, six more directions after them
along the free velocity's components (``dpost[k][:, nt + j]``: the
derivative of the post-impact velocity along ``v_j``).
"""

from typing import NamedTuple

import numpy as np
from numba import prange

from ..kernel.config import JIT_PARALLEL, jit
from ..kernel.status import STATUS_OK, check
from ..laws.impact_maps import impact


class Events(NamedTuple):
    """A batch of impact events (see the module docstring)."""

    ev_law: np.ndarray        # (E,) int64
    ev_inv_mass: np.ndarray   # (E, 6, 6)
    ev_vel: np.ndarray        # (E, 6)
    ev_cptr: np.ndarray       # (E + 1,) int64
    c_arm: np.ndarray         # (C, 3)
    c_normal: np.ndarray      # (C, 3)
    c_mu: np.ndarray          # (C,) int64, index into the coefficient vector
    c_e: np.ndarray           # (C,) int64
    edges: int = 4


@jit(**JIT_PARALLEL)
def _run(events, theta, dirs, state, post, dpost, status):
    ev_law, ev_inv_mass, ev_vel, ev_cptr = (events.ev_law, events.ev_inv_mass, events.ev_vel,
                                            events.ev_cptr)
    c_arm, c_normal, c_mu, c_e = events.c_arm, events.c_normal, events.c_mu, events.c_e
    edges = events.edges
    n = ev_law.shape[0]
    nt = dirs.shape[1]
    ntot = dpost.shape[2]
    for k in prange(n):
        a, b = ev_cptr[k], ev_cptr[k + 1]
        nc = b - a
        mu = np.empty(nc)
        e = np.empty(nc)
        dmu = np.zeros((nc, ntot))
        de = np.zeros((nc, ntot))
        for c in range(nc):
            mu[c] = theta[c_mu[a + c]]
            e[c] = theta[c_e[a + c]]
            for d in range(nt):
                dmu[c, d] = dirs[c_mu[a + c], d]
                de[c, d] = dirs[c_e[a + c], d]
        dv = np.zeros((6, ntot))
        if state:
            for j in range(6):
                dv[j, nt + j] = 1.0
        out = np.zeros(6)
        dout = np.zeros((6, ntot))
        status[k] = impact(ev_law[k], ev_inv_mass[k], c_arm[a:b], c_normal[a:b], ev_vel[k], mu, e,
                           edges, (dv, dmu, de), (out, dout))
        post[k] = out
        dpost[k] = dout


def run(events, theta, dirs=None, state=False, names=None, strict=True):
    """``(post (E, 6), dpost (E, 6, nt [+ 6]), status (E,))`` of every event
    at coefficients ``theta (P,)``, with tangents along ``dirs (P, nt)``
    (None: none) and, with ``state``, the free velocity's six components.
    ``strict``: raise naming the first event that failed (``names`` its
    ids) instead of returning its status."""
    theta = np.ascontiguousarray(theta, np.float64)
    dirs = np.zeros((theta.size, 0)) if dirs is None else np.ascontiguousarray(dirs, np.float64)
    n = events.ev_law.shape[0]
    ntot = dirs.shape[1] + (6 if state else 0)
    post = np.zeros((n, 6))
    dpost = np.zeros((n, 6, ntot))
    status = np.zeros(n, np.int64)
    _run(events._replace(edges=np.int64(events.edges)), theta, dirs, bool(state), post, dpost,
         status)
    if strict:
        check(status, np.zeros(n), names)
    return post, dpost, status


def ok(status):
    """Which events ran (their status is :data:`STATUS_OK`)."""
    return np.asarray(status) == STATUS_OK
