"""The Moreau-Jean time-stepper (``002_*``: contact as a unilateral
constraint, time-stepping in Moreau's sense), integrator ``moreau``: rigid
boxes and spheres against the ground, walls and each other, velocity-level
impulses from a complementarity problem per step.

Each step of size ``h`` (:func:`step`):

1. ``detect``: the contact points at the step's start
   (:func:`simcore.rigid.rigid_engine.detect`: the corners, or a sphere's
   lowest point, below a plane or in another body); these are the step's
   active contacts;
2. free velocity: ``v_f = v + h g`` (gravity; the angular velocity by
   :func:`simcore.geometry.rigid.angular_kick` without torque);
3. impulses: per island, the problem of its active contacts under
   Newton's restitution, ``0 <= lambda _|_ N v+ + e min(N v, 0) >= 0`` with
   ``v`` the velocity at the step's start (a contact that closes leaves at
   ``e`` times its approach speed, a resting one, ``N v = 0``, stays at
   rest), and Coulomb friction over the model's cone (``cone``, as the
   penalty stepper's): the elliptic cone, the default
   (:func:`simcore.laws.elliptic.step_elliptic`: isotropic friction, the
   same in every sliding direction), or a pyramid of ``edges`` edges
   (:data:`simcore.laws.impact_maps.EDGES`, ``cone: pyramidal``; the
   Stewart-Trinkle problem, :func:`simcore.laws.impact_maps.step_newton`,
   solved exactly by Lemke's pivots);
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
to zero and it takes no step until a control, or a moving body, touches
it.  The steps taken
together still count as steps (a run's ``steps`` is its simulated time
over ``h``).

The coefficients are the penalty laws' (the same names mean the same
physics): the kind's restitution (``e_bg``, ``e_bw``, ``e_bb``) and its
kinetic friction (``mu_k``, ``mu_w``, ``mu_bb``) as the cone; the static
coefficients, the stiction curve, the springs and rolling resistance are
not read.  Under the patent's impulse law (the sliding spheres,
:mod:`simcore.sliding`) the same rows hold the law's coefficients
(:meth:`simcore.params.Layout.penalty_rows`), the spheres do not turn
(infinite inertia: the sliding model's bodies translate only), and a ground
contact's cone is ``mu_s`` while its body's horizontal speed at the step's
start is below ``v_th``, ``mu_k`` at or above (claim 9, the sliding model's
regime; :func:`friction_column`): a regime chosen at a step's start moves
with no coefficient, so ``v_th`` has no tangent.  Body-body contacts keep
Coulomb's stick (the sliding model's bodies pressed together without
relative sliding carry no tangential force: a difference only where balls
rest pressed into each other).  Reconstructions: contacts are active from
the step in which they penetrate (Moreau's index set at the step's start,
``theta = 0``), so a
body that lands keeps the penetration of that step (at most ``h`` times its
approach speed) with no position correction.  On the elliptic cone a
body alone against planes and fixed bodies is solved whole
(:func:`simcore.laws.elliptic.step_elliptic`), an island of several
bodies by block Gauss-Seidel over its contacts
(:func:`simcore.laws.elliptic.step_elliptic_sweeps`, each contact's disk
problem exact in turn), as the pyramid's islands are.
Bodies in contact with each other form an island (:func:`_islands`; a
fixed body, a table as a box, belongs to the world as the ground does),
whose problem couples them: its rows carry ``(d, r x d)`` at body i's
columns and the negative at body j's (the force on i is ``+F n``).  One
body's problem is solved whole by Lemke's pivots, starting from its
previous step's basis when its contacts are the same
(:func:`simcore.kernel.lcp.lemke_warm`: kept only when it solves the new
problem exactly); an island of several bodies by block Gauss-Seidel over
its contacts (:func:`simcore.laws.impact_maps.step_newton_sweeps`, from
the last step's impulses): a stack's faces meet at four coplanar points,
and that problem is too degenerate for the pivots over all of it.  An
island sleeps as a whole, and a body that touches a moving one wakes.
Surfaces closer than :data:`~simcore.kernel.config.SKIN` count as touching
(a box resting on another without penetration would have its points
chosen by rounding).

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

from ..geometry.faces import KIND_GROUND, bounding_radius
from ..geometry.rigid import angular_kick, integrate_orientation, inv_inertia_times
from ..kernel.config import T_SLEEP, V_SLEEP, jit
from ..kernel.lcp import LCP_MAX
from ..kernel.status import STATUS_OK
from ..laws.elliptic import step_elliptic, step_elliptic_sweeps
from ..laws.impact_maps import (
    DISK,
    EDGES,
    drows,
    edge,
    frame,
    frame_tangent,
    step_newton,
    step_newton_sweeps,
    tangent_rows,
)
from ..laws.penalty import C_E, C_MU_K, C_MU_S, C_VE2
from ..laws.registry import LAW_IMPULSE
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
    (:func:`simcore.kernel.lcp.lemke_warm`), kept at the island's root;
    ``tref (nb, 6, NT)``: the tangents of ``vref``, ``wref``; ``root
    (nb,)``: each moving body's island (the smallest index among the bodies
    its contacts link it to; -1: a body that does not move); ``impulses (nb,
    C, 2 + EDGES)``: the last impulses of an island of several bodies, per
    contact, at its root (the start of the next step's sweeps); ``members``,
    ``slot (nb,)``, ``cs (C,)``: an island's (:func:`_members`); ``point (C,
    3)``: the step's impulse on ``pts.i[c]`` at each contact point (0 where
    no awake island holds it; :mod:`simcore.rigid.phases`); ``scratch``: an
    island's problem, flat, sized for every body and point
    (:func:`_problem`: its views), so that a step allocates nothing outside
    its solver."""

    vref: np.ndarray
    wref: np.ndarray
    rest: np.ndarray
    reach: np.ndarray
    keys: np.ndarray
    nkeys: np.ndarray
    basis: np.ndarray
    ridge: np.ndarray
    tref: np.ndarray
    root: np.ndarray
    impulses: np.ndarray
    members: np.ndarray
    slot: np.ndarray
    cs: np.ndarray
    point: np.ndarray
    scratch: np.ndarray


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
                np.zeros((nb, 6, nt)), np.full(nb, -1, np.int64),
                np.zeros((nb, cap, 2 + EDGES)), np.zeros(nb, np.int64),
                np.zeros(nb, np.int64), np.zeros(cap, np.int64), np.zeros((max(cap, 1), 3)),
                np.zeros(_scratch_size(nb, cap)))


@jit(borrow=True)
def _scratch_size(nb, cap):
    """The floats :func:`_problem` takes for ``nb`` bodies and ``cap``
    points: ``G``, ``W`` (the pyramid's rows, the most), ``v``, ``v0``,
    ``post``, ``mu``, ``e``, ``z``."""
    d, rows = 6 * nb, cap * (1 + EDGES)
    return d * d + rows * d + 3 * d + 2 * cap + rows


@jit(borrow=True)
def _same_contacts(mw, r, pts, cs):
    """Whether the contacts ``cs`` (point indices) of the island rooted at
    ``r`` are those of its last problem, in the same order (its keys
    updated)."""
    same = cs.shape[0] == mw.nkeys[r]
    for k in range(cs.shape[0]):
        key = pts.key[cs[k]]
        if k >= mw.nkeys[r] or mw.keys[r, k] != key:
            same = False
        mw.keys[r, k] = key
    mw.nkeys[r] = cs.shape[0]
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
    """Wake body ``i`` (a control acts on it, or a moving body touches it)."""
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
        if tg.nt:
            rigid_tangent.fall(tg, i, h)
        angular_kick(b.quat[i], b.omega[i], b.inertia[i], (0.0, 0.0, 0.0), h)


@jit(borrow=True)
def _speed(b, mw, i):
    """The fastest a point of body ``i`` moves, at most: its centre's speed
    plus its angular speed times its reach."""
    w = b.omega[i]
    return (np.sqrt(b.vel[i, 0] ** 2 + b.vel[i, 1] ** 2 + b.vel[i, 2] ** 2)
            + mw.reach[i] * np.sqrt(w[0] ** 2 + w[1] ** 2 + w[2] ** 2))


@jit(borrow=True)
def _settle(b, mw, members, touching, h, nt):
    """An island's time at rest after a step (``touching``: it had
    contacts): every member's grows while all of them are slower than
    ``V_SLEEP``, so they fall asleep together; asleep, a body's velocities
    are zero.  A run with ``nt`` directions keeps every body awake (sleep
    would cut its tangents)."""
    slow = touching and nt == 0
    for i in members:
        slow = slow and _speed(b, mw, i) < V_SLEEP
    for i in members:
        mw.rest[i] = mw.rest[i] + h if slow else 0.0
        if mw.rest[i] >= T_SLEEP:
            for a in range(3):
                b.vel[i, a] = 0.0
                b.omega[i, a] = 0.0


@jit(borrow=True)
def coefficient_row(b, pl, pts, c):
    """Point ``c``'s coefficient row index: its kind, body i's material and
    that of what it touches (the other body's, the plane's; 0: the ground)."""
    other = b.mat[pts.j[c]] if pts.j[c] >= 0 else pl.mat[pts.plane[c]]
    return pts.kind[c], b.mat[pts.i[c]], other


@jit(borrow=True)
def _find(root, i):
    while root[i] != i:
        i = root[i]
    return i


@jit(borrow=True)
def _islands(b, pts, mw, n):
    """``mw.root``: the islands of the moving bodies, linked by their
    contacts with each other (a fixed body links nothing: it is part of the
    world, as the ground is).  A sleeping body touched by a moving one
    wakes first."""
    for c in range(n):
        i, j = pts.i[c], pts.j[c]
        if j >= 0 and not (b.fixed[i] or b.fixed[j]) and moves(b, mw, i) != moves(b, mw, j):
            wake(mw, i)
            wake(mw, j)
    for i in range(b.count):
        mw.root[i] = i if moves(b, mw, i) else -1
    for c in range(n):
        i, j = pts.i[c], pts.j[c]
        if j < 0 or mw.root[i] < 0 or mw.root[j] < 0:
            continue
        ri, rj = _find(mw.root, i), _find(mw.root, j)
        mw.root[max(ri, rj)] = min(ri, rj)
    for i in range(b.count):
        if mw.root[i] >= 0:
            mw.root[i] = _find(mw.root, i)


@jit(borrow=True)
def impulses(b, pl, coef, pts, mw, tg, edges, h):
    """Step 3: the contact impulses of each island of awake bodies (module
    docstring) from the velocities ``mw.vref``, ``mw.wref`` at the step's
    start (their tangents ``mw.tref``), with their tangents along the
    directions of ``tg``; then its time at rest.  Returns the status."""
    n = pts.count[0]
    mw.point[:n] = 0.0
    _islands(b, pts, mw, n)
    for r in range(b.count):
        if mw.root[r] != r:
            continue
        k, nc = _members(b, pts, mw, r, n)
        members, slot, cs = mw.members[:k], mw.slot, mw.cs[:nc]
        if not _same_contacts(mw, r, pts, cs):
            mw.ridge[r, 0] = -1
            mw.impulses[r, :, :] = 0.0
        if cs.shape[0] == 0:
            _settle(b, mw, members, False, h, tg.nt)
            continue
        status = _island(b, pl, coef, pts, mw, tg, edges, (r, members, slot, cs))
        if status != STATUS_OK:
            return status
        _settle(b, mw, members, True, h, tg.nt)
    return STATUS_OK


@jit(borrow=True)
def _members(b, pts, mw, r, n):
    """The island rooted at ``r``: its members into ``mw.members``, each
    body's place among them into ``mw.slot`` (-1: not one) and its contacts
    among the ``n`` points into ``mw.cs``; returns how many of each."""
    k = 0
    for i in range(b.count):
        mw.slot[i] = -1
        if mw.root[i] == r:
            mw.members[k] = i
            mw.slot[i] = k
            k += 1
    nc = 0
    for c in range(n):
        if mw.slot[pts.i[c]] >= 0 or (pts.j[c] >= 0 and mw.slot[pts.j[c]] >= 0):
            mw.cs[nc] = c
            nc += 1
    return k, nc


@jit(borrow=True)
def _island(b, pl, coef, pts, mw, tg, edges, island):
    """One island's impulses: ``island = (root, members, slot, contacts)``
    (``slot``: each body's place among the members, -1: not one).  Its
    bodies' velocities, and with one body its tangents, are replaced by the
    step's.  ``edges``: the pyramid's, or :data:`~simcore.laws.impact_maps.
    DISK` (the elliptic cone).  Its problem is gathered into ``mw.scratch``
    (:func:`_problem`) and solved by :func:`_solve` (with the tangents of
    ``tg``: :func:`_solve_tangents`).  Returns the status."""
    r, members, slot, cs = island
    k, nc = members.shape[0], cs.shape[0]
    G, W, v, v0, post, mu, e, z = _problem(mw.scratch, 6 * k, nc, edges)
    _bodies(b, mw, members, G, v, v0)
    _rows(b, pl, coef, pts, mw, slot, cs, edges, W, mu, e)
    problem = (G, W, v, v0, mu, e)
    if tg.nt and k == 1:
        status = _solve_tangents(b, pl, coef, pts, mw, tg, r, cs, edges, problem, (post, z))
    else:
        status = _solve_plain(problem, post, z, edges, k, mw.impulses[r],
                              (mw.basis[r], mw.ridge[r]))
    if status != STATUS_OK:
        return status
    _point_impulses(pts, cs, z, edges, mw.point)
    for q in range(k):
        i = members[q]
        for a in range(3):
            b.vel[i, a], b.omega[i, a] = post[6 * q + a], post[6 * q + 3 + a]
    return STATUS_OK


@jit(borrow=True)
def _problem(scratch, D, nc, edges):
    """Views of ``scratch`` (:class:`Work`) for an island of ``D`` velocities
    and ``nc`` contacts: ``G (D, D)``, ``W (nc (1 + m), D)``, ``v``, ``v0``,
    ``post (D,)``, ``mu``, ``e (nc,)``, ``z (nc, 1 + m)`` (``m``: the
    cone's tangential rows); ``G`` and ``W`` zeroed."""
    m = tangent_rows(edges)
    rows = nc * (1 + m)
    at = 0
    G = scratch[at:at + D * D].reshape((D, D))
    at += D * D
    W = scratch[at:at + rows * D].reshape((rows, D))
    at += rows * D
    G[:, :] = 0.0
    W[:, :] = 0.0
    v, v0, post = scratch[at:at + D], scratch[at + D:at + 2 * D], scratch[at + 2 * D:at + 3 * D]
    at += 3 * D
    mu, e = scratch[at:at + nc], scratch[at + nc:at + 2 * nc]
    at += 2 * nc
    z = scratch[at:at + rows].reshape((nc, 1 + m))
    return G, W, v, v0, post, mu, e, z


@jit
def _solve_plain(problem, post, z, edges, k, last, warm):
    """:func:`_solve` without tangents."""
    G, _, _, _, mu, _ = problem
    D, nc = G.shape[0], mu.shape[0]
    none = (np.zeros((D, 0)), np.zeros((D, 0)), np.zeros((nc, 0)), np.zeros((nc, 0)),
            np.zeros((0, D, 0)), np.zeros((D, D, 0)))
    return _solve(problem, (post, np.zeros((D, 0))), z, edges, k, last, warm, none)


@jit
def _solve(problem, out, z, edges, k, last, warm, tangents):
    """An island's problem ``(G, W, v, v0, mu, e)`` (:func:`_problem`) on
    ``k`` bodies: one body's solved whole
    (:func:`simcore.laws.elliptic.step_elliptic`, from the last step's
    impulses; :func:`simcore.laws.impact_maps.step_newton`: Lemke's pivots,
    warm-started from ``warm``); several: by block Gauss-Seidel over the
    contacts (:func:`simcore.laws.elliptic.step_elliptic_sweeps`,
    :func:`simcore.laws.impact_maps.step_newton_sweeps`, from the last
    step's impulses ``last (C, 2 + EDGES)``, the island root's), and no
    tangents: contacts between bodies, whose scenario
    :func:`simcore.rigid.rigid_tangent.detect` flags for differences.
    ``out = (post (D,), dpost (D, nt))``; ``z (nc, 1 + m)``: the impulses;
    ``tangents``: :func:`_tangents`'.  Returns the status."""
    G, W, v, v0, mu, e = problem
    nc, m = mu.shape[0], tangent_rows(edges)
    start = last[:nc, :1 + m]
    if edges == DISK:
        if k == 1:
            status = step_elliptic(G, W, v, v0, mu, e, out, start, warm, tangents)
        else:
            status = step_elliptic_sweeps(G, W, v, v0, mu, e, out, start, tangents)
        z[:, :] = start
    elif k == 1:
        status, zs = step_newton(G, W, v, v0, mu, e, edges, out, warm, tangents)
        for q in range(nc):
            z[q, 0] = zs[q]
            for a in range(edges):
                z[q, 1 + a] = zs[nc + q * edges + a]
    else:
        status = step_newton_sweeps(G, W, v, v0, mu, e, edges, out[0], last[:nc, :2 + edges])
        z[:, :] = start
    return status


@jit
def _solve_tangents(b, pl, coef, pts, mw, tg, r, cs, edges, problem, answer):
    """:func:`_solve` of one body ``r``'s problem with its tangents along
    ``tg``'s directions (:func:`_tangents`), ``answer = (post, z)``; the
    body's velocities' tangents into ``tg``."""
    post, z = answer
    nt = tg.nt
    dpost = np.zeros((6, nt))
    tangents = _tangents(b, pl, coef, pts, mw, tg, r, cs, edges, nt)
    status = _solve(problem, (post, dpost), z, edges, 1, mw.impulses[r],
                    (mw.basis[r], mw.ridge[r]), tangents)
    for a in range(3):
        for p in range(nt):
            tg.vel[r, a, p], tg.omega[r, a, p] = dpost[a, p], dpost[3 + a, p]
    return status


@jit(borrow=True)
def _point_impulses(pts, cs, z, nd, point):
    """Each contact's impulse on ``pts.i`` (world frame) into ``point``, from
    its normal and tangential impulses ``z (nc, 1 + m)`` (``m`` the
    pyramid's ``nd`` edges, or the elliptic cone's two axes)."""
    for q in range(cs.shape[0]):
        c = cs[q]
        n = pts.normal[c]
        t1, t2 = frame(n)
        for a in range(3):
            point[c, a] = z[q, 0] * n[a]
        for k in range(tangent_rows(nd)):
            d = edge(t1, t2, k, nd)
            for a in range(3):
                point[c, a] += z[q, 1 + k] * d[a]


@jit(borrow=True)
def _bodies(b, mw, members, G, v, v0):
    """The members' inverse mass matrix into ``G (6k, 6k)`` (block
    diagonal, zeroed), their free velocities into ``v`` and velocities at
    the step's start into ``v0 (6k,)``."""
    for s in range(members.shape[0]):
        i, o = members[s], 6 * s
        for a in range(3):
            G[o + a, o + a] = b.inv_mass[i]
            col = inv_inertia_times(b.quat[i], b.inertia[i], 1.0 * (a == 0), 1.0 * (a == 1),
                                    1.0 * (a == 2))
            for q in range(3):
                G[o + 3 + q, o + 3 + a] = col[q]
            v[o + a], v[o + 3 + a] = b.vel[i, a], b.omega[i, a]
            v0[o + a], v0[o + 3 + a] = mw.vref[i, a], mw.wref[i, a]


@jit(borrow=True)
def friction_column(coef, pts, mw, c, row):
    """The column of point ``c``'s row that its cone reads: the kind's
    kinetic coefficient ``C_MU_K``; under the patent's impulse law, a ground
    contact's follows its body's speed regime at the step's start, as the
    sliding model's (claim 9): ``C_MU_S`` (``mu_s``) while the horizontal
    speed is below ``v_th`` (``row[C_VE2]``, ``row`` the point's
    coefficients), ``C_MU_K`` at or above."""
    kind = pts.kind[c]
    if kind != KIND_GROUND or coef.laws[kind] != LAW_IMPULSE:
        return C_MU_K
    i = pts.i[c]
    speed = np.sqrt(mw.vref[i, 0] ** 2 + mw.vref[i, 1] ** 2)
    return C_MU_K if speed >= row[C_VE2] else C_MU_S


@jit(borrow=True)
def _rows(b, pl, coef, pts, mw, slot, cs, nd, W, mu, e):
    """The contacts' rows into ``W (nc (1 + nd), D)`` (zeroed; the ordering
    of :func:`simcore.laws.impact_maps.rows`: the normal rows, then each
    contact's ``nd`` edge rows), each ``(d, r x d)`` at body i's columns
    and its negative at body j's (when they are members), and their
    friction (:func:`friction_column`) and restitution into ``mu``, ``e
    (nc,)``."""
    nc, m = cs.shape[0], tangent_rows(nd)
    for q in range(nc):
        c = cs[q]
        n = pts.normal[c]
        t1, t2 = frame(n)
        row = coef.table[coefficient_row(b, pl, pts, c)]
        mu[q], e[q] = row[friction_column(coef, pts, mw, c, row)], row[C_E]
        for k in range(m + 1):
            w = q if k == 0 else nc + q * m + k - 1
            d = (n[0], n[1], n[2]) if k == 0 else edge(t1, t2, k - 1, nd)
            for side in range(2):
                i = pts.i[c] if side == 0 else pts.j[c]
                if i < 0 or slot[i] < 0:
                    continue
                sign = 1.0 if side == 0 else -1.0
                arm = (pts.point[c, 0] - b.pos[i, 0], pts.point[c, 1] - b.pos[i, 1],
                       pts.point[c, 2] - b.pos[i, 2])
                _add_row(arm, d, W[w, 6 * slot[i]:6 * slot[i] + 6], sign)


@jit(borrow=True)
def _add_row(r, d, out, sign):
    """Add ``sign (d, r x d)`` (a body's Jacobian row along ``d`` at arm ``r``)
    to ``out (6,)``."""
    out[0] += sign * d[0]
    out[1] += sign * d[1]
    out[2] += sign * d[2]
    out[3] += sign * (r[1] * d[2] - r[2] * d[1])
    out[4] += sign * (r[2] * d[0] - r[0] * d[2])
    out[5] += sign * (r[0] * d[1] - r[1] * d[0])


@jit
def _tangents(b, pl, coef, pts, mw, tg, i, cs, nd, nt):
    """The tangents of one body's problem (:func:`_island` of one member
    ``i``) along ``nt`` of ``tg``'s directions
    (:func:`simcore.laws.impact_maps.step_newton`'s ``tangents``): the free
    velocity's and the start's (``mw.tref``), the coefficients' (a
    direction that moves one counts in ``tg.used``), the rows' from the
    arms' (the points' tangents of :func:`simcore.rigid.rigid_tangent.detect`
    less the centre of mass's; a ground point's directions turning with a
    tilt of the ground, :func:`_tilted`) and the inverse inertia's,
    ``d(I_w^-1) = [rot]x I_w^-1 - I_w^-1 [rot]x - d(ln I) I_w^-1``
    (``tg.iinv`` this step's ``I_w^-1``; the last term an inertia scale's)."""
    nc = cs.shape[0]
    dv = np.zeros((6, nt))
    dvref = np.zeros((6, nt))
    dmu = np.zeros((nc, nt))
    de = np.zeros((nc, nt))
    if nt == 0:
        return dv, dvref, dmu, de, np.zeros((0, 6, 0)), np.zeros((6, 6, 0))
    darms = np.zeros((nc, 3, nt))
    normals = np.empty((nc, 3))
    dG = np.zeros((6, 6, nt))
    for p in range(nt):
        for a in range(3):
            dv[a, p], dv[3 + a, p] = tg.vel[i, a, p], tg.omega[i, a, p]
        for a in range(6):
            dvref[a, p] = mw.tref[i, a, p]
    for q in range(nc):
        c = cs[q]
        at = coefficient_row(b, pl, pts, c)
        trow = tg.coef[at]
        column = friction_column(coef, pts, mw, c, coef.table[at])
        for a in range(3):
            normals[q, a] = pts.normal[c, a]
        for p in range(nt):
            dmu[q, p], de[q, p] = trow[column, p], trow[C_E, p]
            if dmu[q, p] != 0.0 or de[q, p] != 0.0:
                tg.used[p] += 1
            for a in range(3):
                darms[q, a, p] = tg.point[c, a, p] - tg.pos[i, a, p]
    m = tg.iinv[i]
    for p in range(nt):
        t = tg.rot[i, :, p]
        for r in range(3):
            for c in range(3):
                # ([t]x m)[r, c] - (m [t]x)[r, c]
                left = (t[(r + 1) % 3] * m[(r + 2) % 3, c] - t[(r + 2) % 3] * m[(r + 1) % 3, c])
                right = (m[r, (c + 1) % 3] * t[(c + 2) % 3] - m[r, (c + 2) % 3] * t[(c + 1) % 3])
                dG[3 + r, 3 + c, p] = left - right - tg.dlni[i, p] * m[r, c]
    dW = drows(darms, normals, nd)
    _tilted(b, pts, tg, i, cs, nd, dW)
    return dv, dvref, dmu, de, dW, dG


@jit
def _tilted(b, pts, tg, i, cs, nd, dW):
    """Add to the rows' tangents ``dW`` those of the ground points'
    directions under the ground normal's tangent ``tg.dnormal``: a row
    ``(d, r x d)`` moves by ``(dd, r x dd)``, ``dd`` the normal's ``dn`` or
    an edge's ``cos(phi) dt1 + sin(phi) dt2``
    (:func:`simcore.laws.impact_maps.frame_tangent`)."""
    nc = cs.shape[0]
    for q in range(nc):
        c = cs[q]
        if pts.plane[c] != 0 or pts.j[c] >= 0:
            continue
        n = pts.normal[c]
        t1, t2 = frame(n)
        p0 = pts.point[c]
        r = (p0[0] - b.pos[i, 0], p0[1] - b.pos[i, 1], p0[2] - b.pos[i, 2])
        for p in range(tg.nt):
            dn = tg.dnormal[p]
            if dn[0] == 0.0 and dn[1] == 0.0 and dn[2] == 0.0:
                continue
            dt1, dt2 = frame_tangent(n, t1, dn)
            for k in range(-1, tangent_rows(nd)):
                if k < 0:
                    row, dd = q, (dn[0], dn[1], dn[2])
                else:
                    row, dd = nc + q * tangent_rows(nd) + k, edge(dt1, dt2, k, nd)
                dW[row, 0, p] += dd[0]
                dW[row, 1, p] += dd[1]
                dW[row, 2, p] += dd[2]
                dW[row, 3, p] += r[1] * dd[2] - r[2] * dd[1]
                dW[row, 4, p] += r[2] * dd[0] - r[0] * dd[2]
                dW[row, 5, p] += r[0] * dd[1] - r[1] * dd[0]
