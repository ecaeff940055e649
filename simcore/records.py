"""The records kernels pass: one scenario's constants, its scratch, its tangents.

numba compiles ``typing.NamedTuple`` records of arrays like tuples: a kernel
takes a few named records instead of dozens of positional arrays, and the
scratch layout is declared once, here (:func:`workspace`,
:func:`tangent_workspace`).  Every array is float64 (int64 for indices,
bool for flags), SI units, world frame; shapes use ``nb`` bodies, ``nw``
walls, ``npl = nw + 1`` planes (row 0 the ground), ``nc`` control windows,
``ns`` samples and ``NT`` sensitivity directions.
"""

from typing import NamedTuple

import numpy as np

from .config import jit


class Scene(NamedTuple):
    """One scenario's constants, as the scenario kernel sees them.

    ``shape``, ``radius``, ``mass``, ``mat (nb,)``; walls ``wall_n (nw, 3)``,
    ``wall_d``, ``wall_mat (nw,)``; control windows ``c_body``, ``c_t0``,
    ``c_t1 (nc,)`` and ``c_force (nc, 3)``; the run ``[t_start, t_end]``
    with step ``dt``; ``gravity`` [m/s^2] along -z and the nominal ground
    height ``ground_z`` [m]; the coefficients ``params (NPARAM,)`` and the
    material tables ``bb_idx``, ``bw_idx``, ``bg_idx`` (:mod:`simcore.params`);
    the integrator code and the sample times ``samp_t (ns,)``.
    """

    shape: np.ndarray
    radius: np.ndarray
    mass: np.ndarray
    mat: np.ndarray
    wall_n: np.ndarray
    wall_d: np.ndarray
    wall_mat: np.ndarray
    c_body: np.ndarray
    c_t0: np.ndarray
    c_t1: np.ndarray
    c_force: np.ndarray
    t_start: float
    t_end: float
    dt: float
    gravity: float
    ground_z: float
    params: np.ndarray
    bb_idx: np.ndarray
    bw_idx: np.ndarray
    bg_idx: np.ndarray
    integrator: int
    samp_t: np.ndarray


class Sens(NamedTuple):
    """One scenario's sensitivity inputs and outputs (see :mod:`simcore.tangent`).

    Inputs: the directions ``t_param``, ``t_vel``, ``t_ctrl (NT,)`` (-1:
    unused) and the measured positions ``meas (ns, nbmax, 3)`` (NaN: not
    measured; zero rows: no trajectory loss).  Outputs: the trajectory
    residuals ``tr_sse (1,)``, ``tr_grad (NT,)`` = ``J^T r``, ``tr_gn (NT,
    NT)`` = ``J^T J`` (or ``(0, 0)``); the final-state tangents ``fin_tpos``,
    ``fin_tvel (nbmax, 3, NT)``; ``signal (NT,)`` and ``nondiff (1,)``.
    """

    t_param: np.ndarray
    t_vel: np.ndarray
    t_ctrl: np.ndarray
    meas: np.ndarray
    tr_sse: np.ndarray
    tr_grad: np.ndarray
    tr_gn: np.ndarray
    fin_tpos: np.ndarray
    fin_tvel: np.ndarray
    signal: np.ndarray
    nondiff: np.ndarray


class Work(NamedTuple):
    """A scenario's scratch: planes, per-body coefficients, forces and flags.

    Planes ``plane_n (npl, 3)``, ``plane_d (npl,)`` (``n . p = d``; row 0 the
    ground at ``ground_z + ground_offset``).  Per body: ``inv_m`` and the
    ground coefficients ``g_mu_s``, ``g_mu_k``, ``g_vth``, ``g_e (nb,)``;
    against each plane ``pl_mu``, ``pl_e (nb, npl)`` (column 0 of ``pl_mu``
    unused: the ground's friction follows the speed regime); against each
    body ``b_mu``, ``b_e (nb, nb)``.  Motion: ``force``, ``free_acc`` (gravity
    and controls), ``acc`` (with contact forces), ``dacc`` (the acceleration
    the segment drifts with: ``acc``, or 0 after a symplectic kick),
    ``start_dir (nb, 3)``.  Vectors of one event: ``nrm``, ``dva``, ``dvb``,
    ``zero3``, ``rel``, ``at (3,)``.  Flags: ``plane_contact (nb, npl)``,
    ``body_contact (nb, nb)``, ``resting``, ``starting``, ``started``,
    ``above`` (the speed regime: at or above ``v_th``), ``work (nb,)``.
    """

    plane_n: np.ndarray
    plane_d: np.ndarray
    inv_m: np.ndarray
    g_mu_s: np.ndarray
    g_mu_k: np.ndarray
    g_vth: np.ndarray
    g_e: np.ndarray
    pl_mu: np.ndarray
    pl_e: np.ndarray
    b_mu: np.ndarray
    b_e: np.ndarray
    start_dir: np.ndarray
    force: np.ndarray
    free_acc: np.ndarray
    acc: np.ndarray
    dacc: np.ndarray
    nrm: np.ndarray
    dva: np.ndarray
    dvb: np.ndarray
    zero3: np.ndarray
    rel: np.ndarray
    at: np.ndarray
    plane_contact: np.ndarray
    body_contact: np.ndarray
    resting: np.ndarray
    starting: np.ndarray
    started: np.ndarray
    above: np.ndarray
    work: np.ndarray


class TangentWork(NamedTuple):
    """A scenario's tangent scratch (see :mod:`simcore.tangent`).

    ``tpos``, ``tvel``, ``tacc (nb, 3, NT)``: the state's tangents right after
    the last event, at time ``tau`` whose tangent is ``ttau (NT,)``; ``tfa``
    the free acceleration's, ``tsamp`` a sample's; ``ds (NT,)`` the segment
    length's; ``tdva``, ``tdvb (3, NT)`` an event's velocity changes';
    ``pdir (NPARAM,)`` the direction of each coefficient (-1: none).
    """

    tpos: np.ndarray
    tvel: np.ndarray
    tacc: np.ndarray
    tfa: np.ndarray
    tsamp: np.ndarray
    ttau: np.ndarray
    ds: np.ndarray
    tdva: np.ndarray
    tdvb: np.ndarray
    pdir: np.ndarray


@jit
def workspace(nb, nw):
    """A zeroed :class:`Work` for ``nb`` bodies and ``nw`` walls, carved from
    two buffers (a float one and a bool one): two allocations, not thirty."""
    npl = nw + 1
    nf = 4 * npl + 5 * nb + 2 * nb * npl + 2 * nb * nb + 5 * nb * 3 + 6 * 3
    f = np.zeros(nf)
    o = 0
    plane_n = f[o:o + 3 * npl].reshape((npl, 3))
    o += 3 * npl
    plane_d = f[o:o + npl]
    o += npl
    per_body = f[o:o + 5 * nb].reshape((5, nb))
    o += 5 * nb
    pl_mu = f[o:o + nb * npl].reshape((nb, npl))
    pl_e = f[o + nb * npl:o + 2 * nb * npl].reshape((nb, npl))
    o += 2 * nb * npl
    b_mu = f[o:o + nb * nb].reshape((nb, nb))
    b_e = f[o + nb * nb:o + 2 * nb * nb].reshape((nb, nb))
    o += 2 * nb * nb
    vec = f[o:o + 15 * nb].reshape((5, nb, 3))
    o += 15 * nb
    one = f[o:o + 18].reshape((6, 3))
    b = np.zeros(nb * npl + nb * nb + 5 * nb, dtype=np.bool_)
    plane_contact = b[:nb * npl].reshape((nb, npl))
    body_contact = b[nb * npl:nb * npl + nb * nb].reshape((nb, nb))
    flags = b[nb * npl + nb * nb:].reshape((5, nb))
    return Work(plane_n, plane_d, per_body[0], per_body[1], per_body[2], per_body[3],
                per_body[4], pl_mu, pl_e, b_mu, b_e, vec[0], vec[1], vec[2], vec[3], vec[4],
                one[0], one[1], one[2], one[3], one[4], one[5], plane_contact, body_contact,
                flags[0], flags[1], flags[2], flags[3], flags[4])


@jit
def tangent_workspace(nb, nt, nparam):
    """A zeroed :class:`TangentWork` for ``nb`` bodies and ``nt`` directions
    (``pdir`` all -1)."""
    f = np.zeros(5 * nb * 3 * nt + 8 * nt)
    state = f[:15 * nb * nt].reshape((5, nb, 3, nt))
    o = 15 * nb * nt
    per_dir = f[o:o + 2 * nt].reshape((2, nt))
    dv = f[o + 2 * nt:o + 8 * nt].reshape((2, 3, nt))
    return TangentWork(state[0], state[1], state[2], state[3], state[4], per_dir[0],
                       per_dir[1], dv[0], dv[1], np.full(nparam, -1, np.int64))
