"""Sustained contact: normal forces and friction of bodies that stay in touch.

Between impacts a body can rest on the ground, slide on it, be pressed into a
wall or into another body.  Each such contact ``c`` carries a normal force
``N_c >= 0`` and, while it slides, the Coulomb friction ``mu_c N_c`` against
the sliding direction; a body at rest on the ground carries an unknown static
friction force ``s_i`` (horizontal).  With ``n_c`` the contact normal (plane
normal into the free side, or from body i to body j) and ``t_c`` the unit
tangential velocity of the contact (of body i over the plane, or of j
relative to i), the forces on the bodies are

* plane contact (i, k):   ``f_i += N_c (n_k - mu_c t_c)``
* body contact (i, j):    ``f_j += N_c (n - mu_c t_c)``, ``f_i -= N_c (n - mu_c t_c)``
* resting body i:         ``f_i += (s_x, s_y, 0)``

and they are set so that every active contact keeps zero normal acceleration
(``n . a_i = 0``, ``n . (a_j - a_i) = 0``) and resting bodies zero horizontal
acceleration.  That is a small square linear system ``A z = b`` in
``z = (N..., s...)``, solved by Gaussian elimination with partial pivoting;
where contacts are redundant (the forces are statically indeterminate) the
minimum-norm force set is taken (``_min_norm_solve``).
Complementarity is restored by an active-set loop (Lawson-Hanson style):

1. a normal force that comes out negative (it pulls), the most negative
   first, is clamped to zero while its no-penetration row is kept, and the
   minimum-norm force set is solved again; if the rows cannot all hold that
   way, the contact clamped last is released (the body leaves the wall or
   lifts off the ground).  A uniquely solvable system always releases; a
   statically indeterminate one (bodies at rest pressed into each other and a
   wall) finds an admissible force set instead of a pulling one;
2. a resting body whose static force exceeds ``mu_s N_ground + sum mu_w N_wall``
   starts to slide: its friction becomes kinetic, directed against the
   impending motion ``-s / |s|`` (a ``start`` event).  Against a vertical wall
   the part of ``s`` along the wall normal is first handed to the wall's
   normal force (the two are interchangeable there), so only the tangential
   remainder counts as friction and sets the direction.

The friction coefficient of the ground follows the patent (claim 9): ``mu_s``
while the body's speed regime is below ``v_th``, ``mu_k`` above.  Body-body
contacts without relative tangential velocity (below ``V_STOP``) carry no
tangential force: the sliding model has no static friction between bodies.

Once solved, the accelerations are constant until the next event as long as
every sliding direction stays put: the tangential acceleration of each sliding
contact is parallel to its velocity, and no body contact slides (its normal
would turn).  :func:`solve` reports when that fails, so the caller bounds the
step by ``dt`` (the friction direction is then re-evaluated every ``dt``: first
order in ``dt``, and exact again once the directions line up).
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import DIR_TOL, PIVOT_TOL, V_STOP, jit
from ..kernel.parameter import MU_K, MU_S, V_TH, Parameter

#: The ground friction of sustained contact (claim 9), per body material.
PARAMETERS = (
    Parameter("mu_s", 0.30, (0.0, np.inf), "1",
              "ground friction below the threshold speed v_th (\"static\" in the patent: it "
              "also acts on a body moving slower than v_th, and holds a body at rest while "
              "the applied force is within mu_s N); mu_s >= mu_k",
              "ground slide below v_th (or a start from rest)", "ground", MU_S),
    Parameter("mu_k", 0.20, (0.0, np.inf), "1", "ground friction at speeds >= v_th (kinetic)",
              "ground slide at or above v_th", "ground", MU_K),
    Parameter("v_th", 0.05, (0.0, np.inf), "m/s",
              "threshold speed between the two ground coefficients (> 0)",
              "crossing of v_th while sliding", "ground", V_TH),
)

#: Rows of the ground-mode flags ``modes (4 or more, nb)`` bool: resting,
#: starting (sliding from rest along ``start_dir``), started (by this
#: solve), speed regime at or above ``v_th``.
RESTING, STARTING, STARTED, ABOVE = 0, 1, 2, 3

# Unknown kinds of the contact system.
U_PLANE = 0
U_BODY = 1
U_STATIC_X = 2
U_STATIC_Y = 3

#: Relative size (to the body weight scale) below which a negative normal
#: force is rounding, not pulling.
N_TOL = 1e-9
#: Relative residual above which the contact rows are inconsistent.
RES_TOL = 1e-9


@jit(borrow=True)
def _gauss_solve(a, b, n, pivot_tol, x):
    """Solve ``a[:n, :n] x[:n] = b[:n]`` by partial pivoting (``a`` and ``b``
    overwritten).

    Returns ``ok``: False when a pivot is below ``pivot_tol`` times the
    largest entry (redundant contacts: the forces are statically
    indeterminate), and ``x`` is then meaningless.
    """
    scale = 0.0
    for i in range(n):
        for j in range(n):
            scale = max(scale, abs(a[i, j]))
    tol = pivot_tol * scale
    for i in range(n):
        x[i] = 0.0
    for col in range(n):
        piv = col
        best = abs(a[col, col])
        for r in range(col + 1, n):
            if abs(a[r, col]) > best:
                best = abs(a[r, col])
                piv = r
        if best <= tol:
            return False
        if piv != col:
            for j in range(n):
                a[col, j], a[piv, j] = a[piv, j], a[col, j]
            b[col], b[piv] = b[piv], b[col]
        for r in range(col + 1, n):
            f = a[r, col] / a[col, col]
            if f != 0.0:
                for j in range(col, n):
                    a[r, j] -= f * a[col, j]
                b[r] -= f * b[col]
    for i in range(n - 1, -1, -1):
        acc = b[i]
        for j in range(i + 1, n):
            acc -= a[i, j] * x[j]
        x[i] = acc / a[i, i]
    return True


@jit(borrow=True)
def _min_norm_solve(a, b, n, room, x):
    """Minimum-norm solution of a redundant system: ``x = A^T (A A^T + eps I)^-1 b``
    (``A = a[:n, :n]``, into ``x[:n]``; the Gram matrix and its solution in
    ``room.gram``, ``room.w``, ``b`` copied to ``room.b_work``; ``room``
    :class:`Parts`).

    Used when the contact forces are statically indeterminate (a resting body
    held by a wall and by its static friction at once): of all force sets that
    keep the contacts, the smallest one, which spreads the load instead of
    balancing two huge opposite forces.  ``eps = 1e-13 max diag(A A^T)``.
    """
    g, rhs, w = room.gram, room.b_work, room.w
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += a[i, k] * a[j, k]
            g[i, j] = acc
    big = 0.0
    for i in range(n):
        big = max(big, g[i, i])
    for i in range(n):
        g[i, i] += 1e-13 * big
    for i in range(n):
        rhs[i] = b[i]
    _gauss_solve(g, rhs, n, 0.0, w)  # SPD by construction
    for k in range(n):
        acc = 0.0
        for i in range(n):
            acc += a[i, k] * w[i]
        x[k] = acc


@jit(borrow=True)
def _start(i, sx, sy, smag, modes, start_dir):
    """Body i leaves rest: kinetic friction against the impending motion
    ``-s / |s|`` of its static force ``s = (sx, sy)`` (a ``start`` event)."""
    modes[RESTING, i] = False
    modes[STARTING, i] = True
    modes[STARTED, i] = True
    start_dir[i, 0] = -sx / smag
    start_dir[i, 1] = -sy / smag
    start_dir[i, 2] = 0.0


@jit(borrow=True)
def _clamp_order(kind, i, j, plane_clamp, body_clamp):
    """Clamp order of a normal-force unknown (0: free or not a normal force)."""
    if kind == U_PLANE:
        return plane_clamp[i, j]
    if kind == U_BODY:
        return body_clamp[i, j]
    return 0


@jit(borrow=True)
def _release(kind, i, j, plane_contact, body_contact, modes):
    """Drop a contact from the active set (the body leaves the plane or body)."""
    if kind == U_PLANE:
        plane_contact[i, j] = False
        if j == 0:
            modes[RESTING, i] = False
            modes[STARTING, i] = False
    else:
        body_contact[i, j] = False
        body_contact[j, i] = False


@jit(borrow=True)
def _residual(a, x, b, n):
    """``max |a x - b|``."""
    worst = 0.0
    for i in range(n):
        acc = -b[i]
        for j in range(n):
            acc += a[i, j] * x[j]
        worst = max(worst, abs(acc))
    return worst


@jit(borrow=True)
def _absmax(b, n):
    worst = 0.0
    for i in range(n):
        worst = max(worst, abs(b[i]))
    return worst


@jit(borrow=True)
def _unit_tangent(vec, n, out):
    """``out`` = unit of the part of ``vec`` normal to ``n``; returns its size."""
    vn = vec[0] * n[0] + vec[1] * n[1] + vec[2] * n[2]
    t0 = vec[0] - vn * n[0]
    t1 = vec[1] - vn * n[1]
    t2 = vec[2] - vn * n[2]
    size = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if size > 0.0:
        out[0] = t0 / size
        out[1] = t1 / size
        out[2] = t2 / size
    else:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
    return size


class System(NamedTuple):
    """The unknowns of the contact system: ``kind`` (``U_*``), bodies or body
    and plane ``ui``, ``uj``, and per unit unknown the force direction
    ``gdir (nu, 3)`` on body ``ui`` (on ``uj`` for a body pair; ``ui`` sees
    the opposite) and the measured acceleration direction ``hdir``."""

    kind: np.ndarray
    ui: np.ndarray
    uj: np.ndarray
    gdir: np.ndarray
    hdir: np.ndarray


class Contacts(NamedTuple):
    """Active contacts ``plane_contact (nb, nplane)``, ``body_contact (nb, nb)``
    and the ground ``modes``."""

    plane_contact: np.ndarray
    body_contact: np.ndarray
    modes: np.ndarray


class Scratch(NamedTuple):
    """3-vector scratch of the system build: ``tang``, ``nrm``, ``rel``, ``slide``."""

    tang: np.ndarray
    nrm: np.ndarray
    rel: np.ndarray
    slide: np.ndarray


class Room(NamedTuple):
    """Storage for a contact system of up to ``cap = ints.shape[0] // 3``
    unknowns: ``ints (3 cap,)`` and ``floats (3 cap^2 + 10 cap,)``, cut
    into the system's arrays (:class:`Parts`) for the size a solve needs
    (:func:`room` allocates it; two arrays, so a caller that grows it
    rebinds two references, not twenty)."""

    ints: np.ndarray
    floats: np.ndarray


class Parts(NamedTuple):
    """A room cut for ``n`` unknowns: the unknowns ``sysm``, the matrix ``a
    (n, n)`` and right side ``rhs``, their working copies ``a_work``,
    ``b_work``, the Gram matrix ``gram`` of the minimum-norm solve and its
    solution ``w``, the forces ``z``."""

    sysm: System
    a: np.ndarray
    rhs: np.ndarray
    a_work: np.ndarray
    b_work: np.ndarray
    gram: np.ndarray
    w: np.ndarray
    z: np.ndarray


class Marks(NamedTuple):
    """Per-body marks of one solve: ``simple`` (only the ground touches it:
    closed form), ``hold`` (put back at rest, exempt from the cone test),
    the tangential free acceleration ``ptan (nb, 3)`` and the clamp order of
    each normal force ``plane_clamp (nb, nplane)``, ``body_clamp (nb, nb)``."""

    simple: np.ndarray
    hold: np.ndarray
    ptan: np.ndarray
    plane_clamp: np.ndarray
    body_clamp: np.ndarray


class Work(NamedTuple):
    """A scenario's per-body work arrays of the contact solve (:func:`work`):
    the marks and the 3-vector scratch."""

    marks: Marks
    v: Scratch


#: :func:`solve`'s answers besides a request for room (a negative count).
STEADY, ROTATING = 0, 1
#: Unknowns a scenario's first room holds beyond the ``2 nb`` reserved for
#: bodies put back at rest; it grows on demand, so a scene of many bodies on
#: the ground carries no dense matrix for contacts it never has.
FIRST_ROOM = 16


@jit
def room(need, old_cap=0):
    """A :class:`Room` for at least ``need`` unknowns, twice ``old_cap``
    when that is more (a room grows geometrically)."""
    cap = max(need, 2 * old_cap)
    return Room(np.empty(3 * cap, dtype=np.int64), np.empty(3 * cap * cap + 10 * cap))


@jit(borrow=True, inline="always")
def _parts(rm, n):
    """``rm`` cut for ``n`` unknowns (views, contiguous)."""
    ints, f = rm.ints, rm.floats
    sysm = System(ints[:n], ints[n:2 * n], ints[2 * n:3 * n], f[:3 * n].reshape((n, 3)),
                  f[3 * n:6 * n].reshape((n, 3)))
    o = 6 * n
    nn = n * n
    return Parts(sysm, f[o:o + nn].reshape((n, n)), f[o + nn:o + nn + n],
                 f[o + nn + n:o + 2 * nn + n].reshape((n, n)), f[o + 2 * nn + n:o + 2 * nn + 2 * n],
                 f[o + 2 * nn + 2 * n:o + 3 * nn + 2 * n].reshape((n, n)),
                 f[o + 3 * nn + 2 * n:o + 3 * nn + 3 * n], f[o + 3 * nn + 3 * n:o + 3 * nn + 4 * n])


@jit
def work(nb, nplane):
    """The contact solve's per-body work arrays for ``nb`` bodies and ``nplane`` planes."""
    return Work(Marks(np.empty(nb, dtype=np.bool_), np.empty(nb, dtype=np.bool_),
                      np.empty((nb, 3)), np.zeros((nb, nplane), dtype=np.int64),
                      np.zeros((nb, nb), dtype=np.int64)),
                Scratch(np.empty(3), np.empty(3), np.empty(3), np.empty(3)))


@jit(borrow=True, python=True)
def solve(mass, pos, vel, free_acc, plane_n, fric, fl, start_dir, acc, h_dir, cw, rm):
    """Contact forces of one scenario; writes ``acc (nb, 3)``.

    Arrays (one scenario): ``mass (nb,)``, ``pos``/``vel``/``free_acc (nb, 3)``
    (free_acc = gravity + control force / mass), ``plane_n (nplane, 3)``
    (row 0 is the ground); records: ``gc`` each body's ground friction
    ``mu_s``, ``mu_k (nb,)``, ``pc`` the wall friction ``pl_mu (nb, nplane)``
    per body and plane and the body-body friction ``b_mu (nb, nb)``, ``fl``
    the active contacts (:class:`Contacts`: released contacts are cleared;
    the ground modes updated, ``STARTED`` set for bodies that start to slide
    in this call, their ``start_dir (nb, 3)`` written), ``cw`` the per-body
    work arrays (:class:`Work`), ``rm`` the system's (:class:`Room`).

    ``h_dir`` chooses the sliding direction of plane contacts: 0 takes the
    direction of the tangential velocity (exact when it does not rotate);
    ``h > 0`` takes the backward-Euler direction of a step ``h``,
    ``unit(v_t + h P a_free)`` with ``P`` the projection onto the contact
    planes.  The explicit direction is unstable once ``F h / (m |v|) > 2``
    (a slow body pushed across its motion); the implicit one is stable at
    any speed and equals ``v_t / |v_t|`` when the push is along the motion.

    Bodies whose only contact is the ground (the common case: a ball on the
    table) are solved in closed form, with the same arithmetic as the
    general system gives for them; the others go through the general system.
    Returns ``ROTATING`` when some friction direction rotates (bound the step
    by dt), ``STEADY`` when none does, or minus the number of unknowns the
    system needs when ``rm`` holds fewer: nothing is solved then, and the
    caller solves again in a larger :func:`room`.
    """
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    simple = cw.marks.simple
    nb = mass.shape[0]
    nplane = plane_n.shape[0]
    general = False
    for i in range(nb):
        simple[i] = True
        modes[STARTED, i] = False
        for k in range(1, nplane):
            if plane_contact[i, k]:
                simple[i] = False
        for j in range(nb):
            if j != i and body_contact[i, j]:
                simple[i] = False
        general |= not simple[i]
    answer = STEADY
    if general:
        answer = _solve_general(mass, pos, vel, free_acc, plane_n, fric, fl, start_dir, acc,
                                h_dir, cw, rm)
        if answer < 0:
            return answer
    mu_s, mu_k = fric[0], fric[1]
    for i in range(nb):
        if simple[i] and _solve_ground_only(i, mass[i], vel[i], free_acc[i], mu_s[i], mu_k[i],
                                            plane_contact, modes, start_dir, acc, h_dir):
            answer = ROTATING
    return answer


@jit(borrow=True)
def _solve_ground_only(i, m, v, fa, mu_s, mu_k, plane_contact, modes, start_dir, acc, h_dir):
    """Closed form of the contact system for a body whose only contact is the
    ground: ``N = -m a_free,z``; static ``s = -m a_free,h`` within ``mu_s N``
    or a start against it; kinetic ``a = a_free - mu N t / m``.  Returns
    True when the sliding direction rotates."""
    inv_m = 1.0 / m
    if not plane_contact[i, 0]:
        for d in range(3):
            acc[i, d] = fa[d]
        return False
    n_ground = -fa[2] / inv_m
    if n_ground < -N_TOL * m * (1.0 + abs(fa[2])):
        # Pulled off the ground: the body lifts off.
        plane_contact[i, 0] = False
        modes[RESTING, i] = False
        modes[STARTING, i] = False
        for d in range(3):
            acc[i, d] = fa[d]
        return False
    if modes[RESTING, i]:
        sx = -fa[0] / inv_m
        sy = -fa[1] / inv_m
        smag = np.sqrt(sx * sx + sy * sy)
        if smag <= mu_s * n_ground * (1.0 + 1e-12) + 1e-300:
            acc[i, 0] = 0.0
            acc[i, 1] = 0.0
            acc[i, 2] = 0.0
            return False
        _start(i, sx, sy, smag, modes, start_dir)
    # Kinetic friction against the sliding direction (implicit when h_dir > 0).
    t0 = v[0] + h_dir * fa[0]
    t1 = v[1] + h_dir * fa[1]
    size = np.sqrt(t0 * t0 + t1 * t1)
    if size > 0.0:
        t0 /= size
        t1 /= size
    elif modes[STARTING, i]:
        t0 = start_dir[i, 0]
        t1 = start_dir[i, 1]
    mu = mu_k if modes[ABOVE, i] else mu_s
    acc[i, 0] = fa[0] + n_ground * (0.0 - mu * t0) / m
    acc[i, 1] = fa[1] + n_ground * (0.0 - mu * t1) / m
    acc[i, 2] = 0.0
    if modes[STARTED, i] and acc[i, 0] * start_dir[i, 0] + acc[i, 1] * start_dir[i, 1] <= 0.0:
        # Would decelerate at once: static friction holds it (mu_s >= mu_k).
        modes[RESTING, i] = True
        modes[STARTING, i] = False
        modes[STARTED, i] = False
        acc[i, 0] = 0.0
        acc[i, 1] = 0.0
        return False
    # Does the sliding direction (of the velocity) stay put?
    speed = np.sqrt(v[0] * v[0] + v[1] * v[1])
    if speed > 0.0:
        d0 = v[0] / speed
        d1 = v[1] / speed
    elif modes[STARTING, i]:
        d0 = start_dir[i, 0]
        d1 = start_dir[i, 1]
    else:
        return False
    along = acc[i, 0] * d0 + acc[i, 1] * d1
    p0 = acc[i, 0] - along * d0
    p1 = acc[i, 1] - along * d1
    return np.sqrt(p0 * p0 + p1 * p1) > DIR_TOL * (np.sqrt(acc[i, 0] ** 2 + acc[i, 1] ** 2) + 1.0)


@jit(borrow=True)
def _solve_general(mass, pos, vel, free_acc, plane_n, fric, fl, start_dir, acc, h_dir, cw, rm):
    """Contact forces of the bodies not marked ``cw.marks.simple`` (arguments
    and answer as in :func:`solve`).

    An active-set loop: build the unknowns of the current active set, solve
    (:func:`_solve_system`), clamp the most pulling normal force
    (:func:`_clamp_pulling`), start bodies whose static force leaves its
    cone (:func:`_cone_test`), until nothing changes; then the accelerations,
    and bodies started but decelerating at once are put back at rest.
    """
    marks, v = cw.marks, cw.v
    skip, hold = marks.simple, marks.hold
    plane_clamp, body_clamp = marks.plane_clamp, marks.body_clamp
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    nb = mass.shape[0]
    nu = _count_unknowns(skip, plane_contact, body_contact, modes)
    if nu == 0:
        for i in range(nb):
            for d in range(3):
                acc[i, d] = free_acc[i, d]
        return STEADY

    cap_nu = nu + 2 * nb  # room for bodies put back at rest
    if 3 * cap_nu > rm.ints.shape[0]:
        return -cap_nu
    nu = cap_nu
    room = _parts(rm, cap_nu)
    sysm, z = room.sysm, room.z  # z is solved before it is read
    _tangential_free_acc(free_acc, plane_n, plane_contact, h_dir, marks.ptan)

    # A body started by the cone test but decelerating at once under kinetic
    # friction is inconsistent: mu_s >= mu_k, so static friction holds it.
    # It is put back at rest, held (exempt from the cone test), and the
    # system solved again; held flags never revert, so this ends.
    for i in range(nb):
        hold[i] = False
    for _outer in range(nb + 1):
        plane_clamp[:, :] = 0
        body_clamp[:, :] = 0
        clamp_count = 0
        for _it in range(8 * nu + 8):
            # (Re)build the unknown list from the current active set.
            nu = _build_unknowns(skip, pos, vel, plane_n, fric, fl, start_dir, h_dir, marks.ptan,
                                 sysm, v)
            _assemble(room, nu, mass, free_acc)
            if _solve_system(room, nu, plane_clamp, body_clamp, fl):
                plane_clamp[:, :] = 0
                body_clamp[:, :] = 0
                clamp_count = 0
                continue
            # Complementarity 1: a pulling normal force is clamped to zero (the
            # row stays); if that leaves the rows inconsistent the contact is
            # released above.
            if _clamp_pulling(z, nu, sysm, mass, free_acc, plane_clamp, body_clamp,
                              clamp_count + 1):
                clamp_count += 1
                continue
            # Complementarity 2: static friction within its cone, else start.
            if _cone_test(z, nu, sysm, plane_n, fric[2], fric[0], modes, hold, start_dir):
                # Clamps hold for the active set they were found in; a body that
                # starts to slide changes it (starts never revert: this ends).
                plane_clamp[:, :] = 0
                body_clamp[:, :] = 0
                clamp_count = 0
                continue
            break
        _accelerations(z, nu, sysm, mass, free_acc, plane_n, plane_contact, modes, acc)
        if not _revert_started(acc, start_dir, modes, hold):
            break
        nu = cap_nu
    return ROTATING if _rotating(nu, sysm, vel, acc, plane_n, modes, start_dir, v) else STEADY


@jit(borrow=True)
def _count_unknowns(skip, plane_contact, body_contact, modes):
    """One unknown per active contact, two per resting body (its static force)."""
    nb = skip.shape[0]
    nu = 0
    for i in range(nb):
        if skip[i]:
            continue
        for k in range(plane_contact.shape[1]):
            if plane_contact[i, k]:
                nu += 1
        for j in range(i + 1, nb):
            if body_contact[i, j]:
                nu += 1
        if modes[RESTING, i]:
            nu += 2
    return nu


@jit(borrow=True)
def _tangential_free_acc(free_acc, plane_n, plane_contact, h_dir, ptan):
    """Tangential free acceleration of each body (``free_acc`` less its parts
    along the normals of its plane contacts) into ``ptan``, for the implicit
    direction (zero when ``h_dir`` is)."""
    nb = free_acc.shape[0]
    for i in range(nb):
        for d in range(3):
            ptan[i, d] = 0.0
    if h_dir > 0.0:
        for i in range(nb):
            for d in range(3):
                ptan[i, d] = free_acc[i, d]
            for k in range(plane_n.shape[0]):
                if plane_contact[i, k]:
                    an = (ptan[i, 0] * plane_n[k, 0] + ptan[i, 1] * plane_n[k, 1]
                          + ptan[i, 2] * plane_n[k, 2])
                    for d in range(3):
                        ptan[i, d] -= an * plane_n[k, d]


@jit(borrow=True)
def _build_unknowns(skip, pos, vel, plane_n, coef, fl, start_dir, h_dir, ptan, sysm, v):
    """Write the unknowns of the current active set into ``sysm``; returns
    their count (``coef``: ground ``mu_s``, ``mu_k``, wall and body friction
    tables)."""
    kind, ui, uj, gdir, hdir = sysm.kind, sysm.ui, sysm.uj, sysm.gdir, sysm.hdir
    tang, nrm, rel, slide = v.tang, v.nrm, v.rel, v.slide
    plane_contact, body_contact, modes = fl.plane_contact, fl.body_contact, fl.modes
    mu_s, mu_k, plane_mu_tab, body_mu = coef
    nb = pos.shape[0]
    m = 0
    for i in range(nb):
        if skip[i]:
            continue
        for k in range(plane_n.shape[0]):
            if plane_contact[i, k]:
                kind[m] = U_PLANE
                ui[m] = i
                uj[m] = k
                for d in range(3):
                    nrm[d] = plane_n[k, d]
                # Sliding direction of the body over the plane.
                for d in range(3):
                    slide[d] = vel[i, d] + h_dir * ptan[i, d]
                size = _unit_tangent(slide, nrm, tang)
                if size == 0.0 and modes[STARTING, i]:
                    _unit_tangent(start_dir[i], nrm, tang)
                if k == 0:
                    mu = mu_k[i] if modes[ABOVE, i] else mu_s[i]
                else:
                    mu = plane_mu_tab[i, k]
                if modes[RESTING, i]:
                    mu = 0.0
                for d in range(3):
                    gdir[m, d] = nrm[d] - mu * tang[d]
                    hdir[m, d] = nrm[d]
                m += 1
        for j in range(i + 1, nb):
            if body_contact[i, j]:
                kind[m] = U_BODY
                ui[m] = i
                uj[m] = j
                for d in range(3):
                    nrm[d] = pos[j, d] - pos[i, d]
                inv = 1.0 / np.sqrt(nrm[0] ** 2 + nrm[1] ** 2 + nrm[2] ** 2)
                for d in range(3):
                    nrm[d] *= inv
                    rel[d] = vel[j, d] - vel[i, d]
                if _unit_tangent(rel, nrm, tang) <= V_STOP:
                    # Not sliding (rounding): no tangential force.
                    tang[0] = 0.0
                    tang[1] = 0.0
                    tang[2] = 0.0
                mu = body_mu[i, j]
                # gdir/hdir hold the direction acting on body j; body i
                # sees the opposite.
                for d in range(3):
                    gdir[m, d] = nrm[d] - mu * tang[d]
                    hdir[m, d] = nrm[d]
                m += 1
        if modes[RESTING, i]:
            for axis in range(2):
                kind[m] = U_STATIC_X + axis
                ui[m] = i
                uj[m] = -1
                for d in range(3):
                    gdir[m, d] = 0.0
                    hdir[m, d] = 0.0
                gdir[m, axis] = 1.0
                hdir[m, axis] = 1.0
                m += 1
    return m


@jit(borrow=True)
def _assemble(room, nu, mass, free_acc):
    """``A[r, u] = sum over bodies of h_r . g_u / m_b`` into ``room.a`` and
    the right side (the measured free acceleration of each row) into
    ``room.rhs`` (every entry of the leading ``nu`` rows and columns)."""
    sysm, a_mat, rhs = room.sysm, room.a, room.rhs
    kind, ui, uj, gdir, hdir = sysm.kind, sysm.ui, sysm.uj, sysm.gdir, sysm.hdir
    for r in range(nu):
        rb_j = uj[r] if kind[r] == U_BODY else -1
        rb_i = ui[r]
        # Measured acceleration: h . a_j - h . a_i (body) or h . a_i.
        hs_i = -1.0 if kind[r] == U_BODY else 1.0
        rhs[r] = -hs_i * (hdir[r, 0] * free_acc[rb_i, 0]
                          + hdir[r, 1] * free_acc[rb_i, 1]
                          + hdir[r, 2] * free_acc[rb_i, 2])
        if rb_j >= 0:
            rhs[r] -= (hdir[r, 0] * free_acc[rb_j, 0]
                       + hdir[r, 1] * free_acc[rb_j, 1]
                       + hdir[r, 2] * free_acc[rb_j, 2])
        for u in range(nu):
            ub_j = uj[u] if kind[u] == U_BODY else -1
            ub_i = ui[u]
            gs_i = -1.0 if kind[u] == U_BODY else 1.0
            dot = (hdir[r, 0] * gdir[u, 0] + hdir[r, 1] * gdir[u, 1]
                   + hdir[r, 2] * gdir[u, 2])
            val = 0.0
            if rb_i == ub_i:
                val += hs_i * gs_i * dot / mass[rb_i]
            if rb_i == ub_j:
                val += hs_i * dot / mass[rb_i]
            if rb_j >= 0 and rb_j == ub_i:
                val += gs_i * dot / mass[rb_j]
            if rb_j >= 0 and rb_j == ub_j:
                val += dot / mass[rb_j]
            a_mat[r, u] = val


@jit(borrow=True)
def _solve_system(room, nu, plane_clamp, body_clamp, fl):
    """The forces ``room.z`` of the system ``room.a``, ``room.rhs`` with the
    clamped normal forces held at zero; returns ``released``: the rows cannot
    all hold with those forces at zero, and the contact clamped last was
    dropped from the active set (it really separates)."""
    sysm, a_mat, rhs, z = room.sysm, room.a, room.rhs, room.z
    a_work, b_work = room.a_work, room.b_work
    kind, ui, uj = sysm.kind, sysm.ui, sysm.uj
    nclamp = 0
    for u in range(nu):
        if _clamp_order(kind[u], ui[u], uj[u], plane_clamp, body_clamp) > 0:
            nclamp += 1
    if nclamp == 0:
        _copy(a_mat, nu, a_work)
        for u in range(nu):
            b_work[u] = rhs[u]
        if _gauss_solve(a_work, b_work, nu, PIVOT_TOL, z):
            return False
    # Redundant contacts or clamped forces: the minimum-norm force set with
    # the clamped normal forces held at zero (their columns removed, their
    # no-penetration rows kept).
    _copy(a_mat, nu, a_work)  # (the minimum-norm solve copies rhs itself)
    for u in range(nu):
        if _clamp_order(kind[u], ui[u], uj[u], plane_clamp, body_clamp) > 0:
            for r in range(nu):
                a_work[r, u] = 0.0
    _min_norm_solve(a_work, rhs, nu, room, z)
    if nclamp > 0 and _residual(a_work, z, rhs, nu) > RES_TOL * (_absmax(rhs, nu) + 1e-300):
        last = -1
        order = 0
        for u in range(nu):
            o = _clamp_order(kind[u], ui[u], uj[u], plane_clamp, body_clamp)
            if o > order:
                order = o
                last = u
        _release(kind[last], ui[last], uj[last], fl.plane_contact, fl.body_contact, fl.modes)
        return True
    return False


@jit(borrow=True)
def _copy(a, n, a_to):
    """``a_to[:n, :n] = a[:n, :n]``."""
    for i in range(n):
        for j in range(n):
            a_to[i, j] = a[i, j]


@jit(borrow=True)
def _clamp_pulling(z, nu, sysm, mass, free_acc, plane_clamp, body_clamp, order):
    """Clamp the most pulling normal force (with clamp ``order``); returns
    whether one pulled."""
    kind, ui, uj = sysm.kind, sysm.ui, sysm.uj
    worst = -1
    worst_val = 0.0
    for u in range(nu):
        if kind[u] == U_PLANE or kind[u] == U_BODY:
            scale = N_TOL * mass[ui[u]] * (1.0 + abs(free_acc[ui[u], 2]))
            if z[u] < -scale and z[u] < worst_val:
                worst_val = z[u]
                worst = u
    if worst < 0:
        return False
    if kind[worst] == U_PLANE:
        plane_clamp[ui[worst], uj[worst]] = order
    else:
        body_clamp[ui[worst], uj[worst]] = order
    return True


@jit(borrow=True)
def _cone_test(z, nu, sysm, plane_n, plane_mu_tab, ground_mu_s, modes, hold, start_dir):
    """Static friction within its cone, else the body starts to slide;
    returns whether one started."""
    kind, ui, uj = sysm.kind, sysm.ui, sysm.uj
    changed = False
    for u in range(nu):
        if kind[u] != U_STATIC_X:
            continue
        i = ui[u]
        sx = z[u]
        sy = z[u + 1]
        # Along a vertical wall's normal the static force and the wall's
        # normal force are interchangeable (indeterminate): move that part
        # to the wall (keeping N >= 0), so only the tangential remainder
        # is friction.
        for w in range(nu):
            if kind[w] == U_PLANE and ui[w] == i and uj[w] > 0:
                k = uj[w]
                if plane_n[k, 2] == 0.0:
                    delta = sx * plane_n[k, 0] + sy * plane_n[k, 1]
                    if z[w] + delta < 0.0:
                        delta = -z[w]
                    z[w] += delta
                    sx -= delta * plane_n[k, 0]
                    sy -= delta * plane_n[k, 1]
        z[u] = sx
        z[u + 1] = sy
        cap = 0.0
        for w in range(nu):
            if kind[w] == U_PLANE and ui[w] == i:
                k = uj[w]
                cap += (ground_mu_s[i] if k == 0 else plane_mu_tab[i, k]) * z[w]
        smag = np.sqrt(sx * sx + sy * sy)
        if not hold[i] and smag > cap * (1.0 + 1e-12) + 1e-300:
            _start(i, sx, sy, smag, modes, start_dir)
            changed = True
    return changed


@jit(borrow=True)
def _accelerations(z, nu, sysm, mass, free_acc, plane_n, plane_contact, modes, acc):
    """Accelerations from the solved forces, rounding removed from the
    constrained directions."""
    kind, ui, uj, gdir = sysm.kind, sysm.ui, sysm.uj, sysm.gdir
    nb = mass.shape[0]
    for i in range(nb):
        for d in range(3):
            acc[i, d] = free_acc[i, d]
    for u in range(nu):
        i = ui[u]
        if kind[u] == U_BODY:
            j = uj[u]
            for d in range(3):
                acc[j, d] += z[u] * gdir[u, d] / mass[j]
                acc[i, d] -= z[u] * gdir[u, d] / mass[i]
        else:
            for d in range(3):
                acc[i, d] += z[u] * gdir[u, d] / mass[i]
    for i in range(nb):
        if modes[RESTING, i]:
            acc[i, 0] = 0.0
            acc[i, 1] = 0.0
            acc[i, 2] = 0.0
            continue
        for k in range(plane_n.shape[0]):
            if plane_contact[i, k]:
                an = (acc[i, 0] * plane_n[k, 0] + acc[i, 1] * plane_n[k, 1]
                      + acc[i, 2] * plane_n[k, 2])
                for d in range(3):
                    acc[i, d] -= an * plane_n[k, d]
        if plane_contact[i, 0]:
            acc[i, 2] = 0.0


@jit(borrow=True)
def _revert_started(acc, start_dir, modes, hold):
    """Bodies started in this solve but decelerating at once are put back at
    rest and held; returns whether any was."""
    reverted = False
    for i in range(acc.shape[0]):
        if modes[STARTED, i]:
            along = acc[i, 0] * start_dir[i, 0] + acc[i, 1] * start_dir[i, 1]
            if along <= 0.0:
                modes[RESTING, i] = True
                modes[STARTING, i] = False
                modes[STARTED, i] = False
                hold[i] = True
                reverted = True
    return reverted


@jit(borrow=True)
def _rotating(nu, sysm, vel, acc, plane_n, modes, start_dir, v):
    """Do the sliding directions stay put under these accelerations?"""
    kind, ui, uj, hdir = sysm.kind, sysm.ui, sysm.uj, sysm.hdir
    tang, nrm, rel = v.tang, v.nrm, v.rel
    rotating = False
    for u in range(nu):
        i = ui[u]
        if kind[u] == U_BODY:
            j = uj[u]
            for d in range(3):
                rel[d] = vel[j, d] - vel[i, d]
                nrm[d] = hdir[u, d]
            if _unit_tangent(rel, nrm, tang) > V_STOP:
                rotating = True
        elif kind[u] == U_PLANE:
            for d in range(3):
                nrm[d] = plane_n[uj[u], d]
            size = _unit_tangent(vel[i], nrm, tang)
            if size == 0.0:
                if not modes[STARTING, i]:
                    continue
                _unit_tangent(start_dir[i], nrm, tang)
            an = acc[i, 0] * nrm[0] + acc[i, 1] * nrm[1] + acc[i, 2] * nrm[2]
            at0 = acc[i, 0] - an * nrm[0]
            at1 = acc[i, 1] - an * nrm[1]
            at2 = acc[i, 2] - an * nrm[2]
            along = at0 * tang[0] + at1 * tang[1] + at2 * tang[2]
            p0 = at0 - along * tang[0]
            p1 = at1 - along * tang[1]
            p2 = at2 - along * tang[2]
            perp = np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
            if perp > DIR_TOL * (np.sqrt(at0 * at0 + at1 * at1 + at2 * at2) + 1.0):
                rotating = True
    return rotating
