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

A toss costs what its contact phases cost (:func:`quiet`, :func:`fly`):
while no awake body can reach a plane or another body (each body's
bounding sphere about its centre of mass, along the ballistic path the
steps themselves take: ``x_m = x + m h v - g h^2 m (m + 1) / 2``), and no
control acts, the stepper takes those steps at once in closed form (the
orientation in one rotation for a body whose inertia is isotropic, whose
angular velocity a torque-free step keeps; step by step otherwise: the
gyroscopic term has no closed form the steps agree with).  A body in
contact that has moved slower than :data:`~simcore.kernel.config.V_SLEEP`
for :data:`~simcore.kernel.config.T_SLEEP` sleeps: its velocities are set
to zero and it takes no step until a control acts on it.  The steps taken
together still count as steps (a run's ``steps`` is its simulated time
over ``h``).

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
``STATUS_UNSUPPORTED_PAIR``.

Each body's LCP starts from its previous step's basis when its contacts
are the same (:func:`simcore.kernel.lcp.lemke_warm`: kept only when it
solves the new problem exactly).

Sensitivities (forward mode, the directions of
:mod:`simcore.rigid.rigid_tangent`'s record): the free velocity's by
:func:`simcore.rigid.rigid_tangent.kick` (no force), the contact points'
by :func:`simcore.rigid.rigid_tangent.detect`, each step's impulses by
the LCP's solution differentiated on its basis with the rows (the arms)
and the inverse inertia moving with the body
(:func:`simcore.laws.impact_maps.step_newton`), the drift's by
:func:`simcore.rigid.rigid_tangent.drift`.  They are the exact
derivatives of the computed steps (the active contacts and the basis held
fixed).  A box sliding flat on a face has four coplanar contacts whose
problem has many solutions: the one chosen, and so the trajectory, can jump
under a small change, where no derivative describes it.  A run with
directions takes every step (no quiet steps, no sleep).
"""

from typing import NamedTuple

import numpy as np

from ..geometry.faces import bounding_radius
from ..geometry.rigid import angular_kick, integrate_orientation, inv_inertia_times
from ..kernel.config import T_SLEEP, V_SLEEP, jit
from ..kernel.lcp import LCP_MAX
from ..kernel.status import STATUS_OK, STATUS_UNSUPPORTED_PAIR
from ..laws.impact_maps import step_newton
from ..laws.penalty import C_E, C_MU_K
from . import rigid_tangent


class Work(NamedTuple):
    """A scenario's arrays for the stepper: the velocities at the step's
    start ``vref``, ``wref (nb, 3)``; ``rest (nb,)`` [s]: how long each body
    has been in contact and slower than ``V_SLEEP`` (asleep from
    ``T_SLEEP``); ``reach (nb,)`` [m]: the radius of its bounding sphere about
    its centre of mass; each body's last problem: its contacts' keys
    ``keys (nb, C)`` (the points' feature keys) and count ``nkeys (nb,)``, the LCP's
    basis ``basis (nb, LCP_MAX)`` and ridge ``ridge (nb, 1)``: the next step on
    the same contacts starts from them
    (:func:`simcore.kernel.lcp.lemke_warm`); ``tref (nb, 6, NT)``: the
    tangents of ``vref``, ``wref``."""

    vref: np.ndarray
    wref: np.ndarray
    rest: np.ndarray
    reach: np.ndarray
    keys: np.ndarray
    nkeys: np.ndarray
    basis: np.ndarray
    ridge: np.ndarray
    tref: np.ndarray


@jit
def work(b, cap, nt):
    """The :class:`Work` of the bodies ``b`` (``cap``: the contact points a
    step can hold; ``nt`` directions), every body awake, no previous
    problem."""
    nb = b.count
    reach = np.empty(nb)
    for i in range(nb):
        c = b.com[i]
        reach[i] = bounding_radius(b.shape[i], b.ext[i]) + np.sqrt(c[0] ** 2 + c[1] ** 2
                                                                    + c[2] ** 2)
    return Work(np.zeros((nb, 3)), np.zeros((nb, 3)), np.zeros(nb), reach,
                np.zeros((nb, cap), np.int64), np.zeros(nb, np.int64),
                np.zeros((nb, LCP_MAX), np.bool_), np.full((nb, 1), -1, np.int64),
                np.zeros((nb, 6, nt)))


@jit(borrow=True)
def _same_contacts(mw, i, pts, n):
    """Whether body ``i``'s contacts among the ``n`` points are those of its
    last problem, in the same order (its keys updated)."""
    same = True
    k = 0
    for c in range(n):
        if pts.i[c] != i:
            continue
        key = pts.key[c]
        if k >= mw.nkeys[i] or mw.keys[i, k] != key:
            same = False
        mw.keys[i, k] = key
        k += 1
    same = same and k == mw.nkeys[i]
    mw.nkeys[i] = k
    return same


@jit(borrow=True)
def moves(b, mw, i):
    """Whether body ``i`` takes steps: not fixed, not asleep."""
    return not b.fixed[i] and mw.rest[i] < T_SLEEP


@jit(borrow=True)
def _clear_of_planes(b, pl, mw, i, gravity, h, m):
    """How many of the states ``0 .. m-1`` along body ``i``'s ballistic
    path (module docstring) keep its bounding sphere off every plane."""
    for k in range(pl.count):
        n = pl.normal[k]
        gap = (n[0] * b.pos[i, 0] + n[1] * b.pos[i, 1] + n[2] * b.pos[i, 2] - pl.offset[k]
               - mw.reach[i])
        rate = h * (n[0] * b.vel[i, 0] + n[1] * b.vel[i, 1] + n[2] * b.vel[i, 2])
        fall = -gravity * h * h * n[2]
        j = 0
        while j < m and gap + j * rate + 0.5 * fall * j * (j + 1) > 0.0:
            j += 1
        m = j
    return m


@jit(borrow=True)
def _travel(b, mw, i, gravity, h, j):
    """A bound on how far body ``i`` moves in ``j`` ballistic steps (0: it
    does not move)."""
    if not moves(b, mw, i):
        return 0.0
    speed = np.sqrt(b.vel[i, 0] ** 2 + b.vel[i, 1] ** 2 + b.vel[i, 2] ** 2)
    return j * h * speed + 0.5 * gravity * h * h * j * (j + 1)


@jit(borrow=True)
def quiet(b, pl, mw, gravity, h, m):
    """How many of the next ``m`` steps (at most) no awake body can touch a
    plane or another body in: the steps :func:`fly` may take at once."""
    for i in range(b.count):
        if moves(b, mw, i):
            m = _clear_of_planes(b, pl, mw, i, gravity, h, m)
    for i in range(b.count):
        for j in range(i + 1, b.count):
            if not (moves(b, mw, i) or moves(b, mw, j)):
                continue
            d = np.sqrt((b.pos[i, 0] - b.pos[j, 0]) ** 2 + (b.pos[i, 1] - b.pos[j, 1]) ** 2
                        + (b.pos[i, 2] - b.pos[j, 2]) ** 2) - mw.reach[i] - mw.reach[j]
            k = 0
            while k < m and d > _travel(b, mw, i, gravity, h, k) + _travel(b, mw, j, gravity, h,
                                                                             k):
                k += 1
            m = k
    return m


@jit(borrow=True)
def fly(b, mw, gravity, h, m):
    """``m`` contact-free steps of every awake body at once (module
    docstring); a body asleep or fixed stays."""
    for i in range(b.count):
        if not moves(b, mw, i):
            continue
        for a in range(3):
            b.pos[i, a] += m * h * b.vel[i, a]
        b.pos[i, 2] -= 0.5 * gravity * h * h * m * (m + 1)
        b.vel[i, 2] -= m * h * gravity
        inertia = b.inertia[i]
        w = b.omega[i]
        if inertia[0] == inertia[1] and inertia[1] == inertia[2]:
            integrate_orientation(b.quat[i], w[0], w[1], w[2], m * h)
            continue
        for _ in range(m):
            angular_kick(b.quat[i], w, inertia, (0.0, 0.0, 0.0), h)
            integrate_orientation(b.quat[i], w[0], w[1], w[2], h)


@jit(borrow=True)
def wake(mw, i):
    """Wake body ``i`` (a control acts on it)."""
    mw.rest[i] = 0.0


@jit(borrow=True)
def free_velocity(b, mw, tg, gravity, h):
    """Step 2: ``v += h g``, angular velocities under no torque (every body
    that moves); ``mw.vref``, ``mw.wref``: the velocities before, ``mw.tref``
    their tangents (those of ``tg`` then carried through the step by
    :func:`simcore.rigid.rigid_tangent.kick`: no force, no torque)."""
    for i in range(b.count):
        for a in range(3):
            mw.vref[i, a], mw.wref[i, a] = b.vel[i, a], b.omega[i, a]
            for p in range(tg.nt):
                mw.tref[i, a, p], mw.tref[i, 3 + a, p] = tg.vel[i, a, p], tg.omega[i, a, p]
    if tg.nt:
        rigid_tangent.kick(b, tg, h)
    for i in range(b.count):
        if not moves(b, mw, i):
            continue
        b.vel[i, 2] -= h * gravity
        angular_kick(b.quat[i], b.omega[i], b.inertia[i], (0.0, 0.0, 0.0), h)


@jit(borrow=True)
def _settle(b, mw, i, touching, h, nt):
    """Body ``i``'s time at rest after a step (``touching``: it had
    contacts); asleep, its velocities are zero.  A run with ``nt``
    directions keeps every body awake (sleep would cut its tangents)."""
    w = b.omega[i]
    speed = (np.sqrt(b.vel[i, 0] ** 2 + b.vel[i, 1] ** 2 + b.vel[i, 2] ** 2)
             + mw.reach[i] * np.sqrt(w[0] ** 2 + w[1] ** 2 + w[2] ** 2))
    mw.rest[i] = mw.rest[i] + h if touching and speed < V_SLEEP and nt == 0 else 0.0
    if mw.rest[i] >= T_SLEEP:
        for a in range(3):
            b.vel[i, a] = 0.0
            b.omega[i, a] = 0.0


@jit
def impulses(b, pl, coef, pts, mw, tg, edges, h):
    """Step 3: each awake body's contact impulses (module docstring) from the
    velocities ``mw.vref``, ``mw.wref`` at the step's start (their tangents
    ``mw.tref``), with their tangents along the directions of ``tg``; then
    its time at rest.  Returns the status."""
    n = pts.count[0]
    for c in range(n):
        if pts.j[c] >= 0:
            return STATUS_UNSUPPORTED_PAIR  # two bodies (one may be fixed): not yet
    for i in range(b.count):
        if not moves(b, mw, i):
            continue
        nc = 0
        for c in range(n):
            if pts.i[c] == i:
                nc += 1
        if not _same_contacts(mw, i, pts, n):
            mw.ridge[i, 0] = -1
        if nc == 0:
            _settle(b, mw, i, False, h, tg.nt)
            continue
        arms, normals, mu, e, G, v, v0 = _problem(b, pl, coef, pts, mw, i, n, nc)
        tangents = _tangents(b, pl, pts, mw, tg, i, n, nc)
        post = np.zeros(6)
        dpost = np.zeros((6, tg.nt))
        status = step_newton(G, arms, normals, v, v0, mu, e, edges, (post, dpost),
                             (mw.basis[i], mw.ridge[i]), tangents)
        if status != STATUS_OK:
            return status
        for a in range(3):
            b.vel[i, a], b.omega[i, a] = post[a], post[3 + a]
            for p in range(tg.nt):
                tg.vel[i, a, p], tg.omega[i, a, p] = dpost[a, p], dpost[3 + a, p]
        _settle(b, mw, i, True, h, tg.nt)
    return STATUS_OK


@jit
def _problem(b, pl, coef, pts, mw, i, n, nc):
    """Body ``i``'s problem at its ``nc`` contacts among the ``n`` points:
    ``(arms, normals, mu, e, G, v, vref)``."""
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
        v0[a], v0[3 + a] = mw.vref[i, a], mw.wref[i, a]
    return arms, normals, mu, e, G, v, v0


@jit
def _tangents(b, pl, pts, mw, tg, i, n, nc):
    """The tangents of :func:`_problem` along ``tg``'s directions
    (:func:`simcore.laws.impact_maps.step_newton`'s ``tangents``): the free
    velocity's and the start's (``mw.tref``), the coefficients' (a
    direction that moves one counts in ``tg.used``), the arms' (the points'
    tangents of :func:`simcore.rigid.rigid_tangent.detect` less the centre
    of mass's) and the inverse inertia's, ``d(I_w^-1) = [rot]x I_w^-1 -
    I_w^-1 [rot]x`` (``tg.iinv`` this step's ``I_w^-1``)."""
    nt = tg.nt
    dv = np.zeros((6, nt))
    dvref = np.zeros((6, nt))
    dmu = np.zeros((nc, nt))
    de = np.zeros((nc, nt))
    darms = np.zeros((nc, 3, nt))
    dG = np.zeros((6, 6, nt))
    if nt == 0:
        return dv, dvref, dmu, de, darms, dG
    for p in range(nt):
        for a in range(3):
            dv[a, p], dv[3 + a, p] = tg.vel[i, a, p], tg.omega[i, a, p]
        for a in range(6):
            dvref[a, p] = mw.tref[i, a, p]
    k = 0
    for c in range(n):
        if pts.i[c] != i:
            continue
        trow = tg.coef[pts.kind[c], b.mat[i], pl.mat[pts.plane[c]]]
        for p in range(nt):
            dmu[k, p], de[k, p] = trow[C_MU_K, p], trow[C_E, p]
            if dmu[k, p] != 0.0 or de[k, p] != 0.0:
                tg.used[p] += 1
            for a in range(3):
                darms[k, a, p] = tg.point[c, a, p] - tg.pos[i, a, p]
        k += 1
    m = tg.iinv[i]
    for p in range(nt):
        t = tg.rot[i, :, p]
        for r in range(3):
            for c in range(3):
                # ([t]x m)[r, c] - (m [t]x)[r, c]
                left = (t[(r + 1) % 3] * m[(r + 2) % 3, c] - t[(r + 2) % 3] * m[(r + 1) % 3, c])
                right = (m[r, (c + 1) % 3] * t[(c + 2) % 3] - m[r, (c + 2) % 3] * t[(c + 1) % 3])
                dG[3 + r, 3 + c, p] = left - right
    return dv, dvref, dmu, de, darms, dG
