"""The Moreau-Jean time-stepper (``002_*``: contact as a unilateral
constraint, time-stepping in Moreau's sense), integrator ``moreau``: rigid
boxes and spheres against the ground and walls, velocity-level impulses
from a complementarity problem per step.

Each step of size ``h`` (:func:`step`):

1. ``detect``: the contact points at the step's start
   (:func:`simcore.rigid.rigid_engine.detect`: the corners, or a sphere's
   lowest point, below a plane); these are the step's active contacts;
2. free velocity: ``v_f = v + h g`` (gravity; the angular velocity by
   :func:`simcore.geometry.rigid.angular_kick` without torque);
3. impulses: per body, the Stewart-Trinkle problem of its active contacts
   under Newton's restitution and Coulomb friction over a pyramid of
   ``edges`` edges (:data:`simcore.laws.impact_maps.EDGES`;
   :func:`simcore.laws.impact_maps.step_newton`, solved
   exactly by Lemke's pivots): ``0 <= lambda _|_ N v+ + e min(N v, 0) >= 0``
   with ``v`` the velocity at the step's start, so a contact that closes
   leaves at ``e`` times its approach speed and a resting one (``N v = 0``)
   stays at rest;
4. ``drift``: ``x' = x + h v+``, ``q' = exp(h w+/2) q``.

The coefficients are the penalty laws' (the same names mean the same
physics): the kind's restitution (``e_bg``, ``e_bw``) and its kinetic
friction (``mu_k``, ``mu_w``) as the cone; the static coefficients, the
stiction curve, the springs and rolling resistance are not read.
Reconstructions: contacts are active from the step in which they
penetrate (Moreau's index set at the step's start, ``theta = 0``), so a
body that lands keeps the penetration of that step (at most ``h`` times its
approach speed) with no position correction; the friction cone is the
pyramid (the elliptic cone would take a nonlinear problem per step).
Contacts between two bodies (a fixed one too: a table as a box) are not
handled yet: a scenario that makes one stops with
``STATUS_UNSUPPORTED_PAIR``.  No sensitivities: a fit
takes the derivatives of these scenarios by central differences.
"""

import numpy as np

from ..geometry.rigid import angular_kick, inv_inertia_times
from ..kernel.config import jit
from ..kernel.status import STATUS_OK, STATUS_UNSUPPORTED_PAIR
from ..laws.impact_maps import step_newton
from ..laws.penalty import C_E, C_MU_K


@jit
def free_velocity(b, gravity, h):
    """Step 2: ``v += h g``, angular velocities under no torque."""
    zero = np.zeros(3)
    for i in range(b.count):
        if b.fixed[i]:
            continue
        b.vel[i, 2] -= h * gravity
        angular_kick(b.quat[i], b.omega[i], b.inertia[i], zero, h)


@jit
def impulses(b, pl, coef, pts, vref, wref, edges):
    """Step 3: each body's contact impulses (module docstring); ``vref``,
    ``wref (nb, 3)``: the velocities at the step's start.  Returns the status."""
    n = pts.count[0]
    for c in range(n):
        if pts.j[c] >= 0:
            return STATUS_UNSUPPORTED_PAIR  # two bodies (one may be fixed): not yet
    for i in range(b.count):
        if b.fixed[i]:
            continue
        nc = 0
        for c in range(n):
            if pts.i[c] == i:
                nc += 1
        if nc == 0:
            continue
        arms = np.empty((nc, 3))
        normals = np.empty((nc, 3))
        mu = np.empty(nc)
        e = np.empty(nc)
        k = 0
        for c in range(n):
            if pts.i[c] != i:
                continue
            for a in range(3):
                arms[k, a] = pts.point[c, a] - b.pos[i, a]
                normals[k, a] = pts.normal[c, a]
            row = coef.table[pts.kind[c], b.mat[i], pl.mat[pts.plane[c]]]
            mu[k] = row[C_MU_K]
            e[k] = row[C_E]
            k += 1
        G = np.zeros((6, 6))
        for a in range(3):
            G[a, a] = b.inv_mass[i]
            col = inv_inertia_times(b.quat[i], b.inertia[i], 1.0 * (a == 0), 1.0 * (a == 1),
                                    1.0 * (a == 2))
            for r in range(3):
                G[3 + r, 3 + a] = col[r]
        v = np.empty(6)
        v0 = np.empty(6)
        for a in range(3):
            v[a], v[3 + a] = b.vel[i, a], b.omega[i, a]
            v0[a], v0[3 + a] = vref[i, a], wref[i, a]
        post = np.zeros(6)
        status = step_newton(G, arms, normals, v, v0, mu, e, edges, post)
        if status != STATUS_OK:
            return status
        for a in range(3):
            b.vel[i, a], b.omega[i, a] = post[a], post[3 + a]
    return STATUS_OK
