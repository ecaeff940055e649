"""Rigid-body state: orientation quaternions, box geometry, inertia, and the
free motion of one step.

Conventions (SI units, float64):

* orientation ``q = (qw, qx, qy, qz)``, scalar first, a unit quaternion that
  rotates body-frame vectors into the world frame: ``x_w = R(q) x_b``;
* angular velocity ``omega`` in the world frame [rad/s];
* principal moments of inertia ``inertia = (ixx, iyy, izz)`` [kg m^2] in the
  body frame (its axes are the box's edges); the world inertia is
  ``R diag(inertia) R^T``;
* a box has half extents ``(hx, hy, hz)`` [m] along its body axes; its
  corners are ``(sx hx, sy hy, sz hz)`` with ``s = +-1`` from its centre,
  numbered by the bits of ``k = 0..7`` (bit 0: x, bit 1: y, bit 2: z; a set
  bit is ``+``);
* a box's centre of mass sits at ``c = (com_x, com_y, com_z)`` [m] in the
  body frame from its centre (default 0); the inertia is about it, and the
  body turns about it.  A state's and a sample's position and velocity are
  the centre's, ``x = x_m - R c`` and ``v = v_m - w x R c`` (what a tracker
  of the box reports); the time-stepper moves the centre of mass
  (:func:`simcore.rigid.rigid_engine._shift`).

The angular velocity of one step (:func:`angular_kick`) integrates Euler's
equations in the body frame with the gyroscopic term implicit (one Newton
step on ``I (w' - w) + h w' x I w' = h tau``, Catto 2015), which keeps a
tumbling body's energy from growing for any step; the orientation follows
the new angular velocity exactly (:func:`integrate_orientation`, ``q' =
exp(h w'/2) q``), so it stays unit.
"""

import numpy as np

from ..kernel.config import jit


@jit(borrow=True)
def _sandwich(w, x, y, z, v0, v1, v2):
    """``q v q*`` for the quaternion ``(w, x, y, z)``: with ``t = 2 (q_vec x
    v)``, ``v' = v + w t + q_vec x t``."""
    t0 = 2.0 * (y * v2 - z * v1)
    t1 = 2.0 * (z * v0 - x * v2)
    t2 = 2.0 * (x * v1 - y * v0)
    return (v0 + w * t0 + (y * t2 - z * t1),
            v1 + w * t1 + (z * t0 - x * t2),
            v2 + w * t2 + (x * t1 - y * t0))


@jit(borrow=True)
def quat_rotate(q, v0, v1, v2):
    """``R(q) v``: the body-frame vector ``v`` in the world frame (a tuple)."""
    return _sandwich(q[0], q[1], q[2], q[3], v0, v1, v2)


@jit(borrow=True)
def quat_unrotate(q, v0, v1, v2):
    """``R(q)^T v``: the world-frame vector ``v`` in the body frame."""
    return _sandwich(q[0], -q[1], -q[2], -q[3], v0, v1, v2)


@jit(borrow=True)
def axis(q, k):
    """The body's axis ``k`` (0, 1, 2) in the world frame: column ``k`` of ``R(q)``."""
    if k == 0:
        return quat_rotate(q, 1.0, 0.0, 0.0)
    if k == 1:
        return quat_rotate(q, 0.0, 1.0, 0.0)
    return quat_rotate(q, 0.0, 0.0, 1.0)


@jit(borrow=True)
def corner(pos, q, ext, k):
    """World position of box corner ``k`` (bits of k: the signs, see the module)."""
    sx = 1.0 if k & 1 else -1.0
    sy = 1.0 if k & 2 else -1.0
    sz = 1.0 if k & 4 else -1.0
    r = quat_rotate(q, sx * ext[0], sy * ext[1], sz * ext[2])
    return pos[0] + r[0], pos[1] + r[1], pos[2] + r[2]


@jit(borrow=True)
def cross(a0, a1, a2, b0, b1, b2):
    """The cross product ``a x b`` of two vectors given by their components
    (a tuple)."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@jit(borrow=True, python=True)
def ground_normal(tilt_x, tilt_y):
    """The ground plane's normal turned by ``tilt_x`` about the world x axis,
    then by ``tilt_y`` about the world y axis, from ``+z``: ``R_y(ty) R_x(tx)
    e_z = (cos tx sin ty, -sin tx, cos tx cos ty)`` (a tuple).  The plane
    passes through ``(0, 0, ground)``: ``n . x = n_z ground``."""
    return np.cos(tilt_x) * np.sin(tilt_y), -np.sin(tilt_x), np.cos(tilt_x) * np.cos(tilt_y)


@jit(borrow=True)
def com_arm(q, com):
    """``R(q) c``: the centre of mass, at ``com`` in the body frame from the
    box's centre, from that centre in the world frame [m] (a tuple)."""
    return quat_rotate(q, com[0], com[1], com[2])


@jit(borrow=True)
def inv_inertia_times(q, inertia, v0, v1, v2):
    """``I_w^-1 v`` with ``I_w = R diag(inertia) R^T`` (a tuple; zero for a
    body of infinite inertia, ``inertia = inf``)."""
    b = quat_unrotate(q, v0, v1, v2)
    return quat_rotate(q, b[0] / inertia[0], b[1] / inertia[1], b[2] / inertia[2])


@jit(borrow=True)
def angular_kick(q, omega, inertia, tau, h):
    """The angular velocity after a step ``h`` [s] under the world torque
    ``tau`` [N m] (a tuple), written into ``omega``.

    In the body frame ``w``: ``w1 = w + h I^-1 tau_b``, then one Newton step
    on the implicit gyroscopic equation ``f(w) = I (w - w1) + h w x I w = 0``
    from ``w1``: ``J = I + h ([w1]x I - [I w1]x)``, ``w' = w1 - J^-1 f(w1)``.
    """
    w0, w1, w2 = free_spin(q, omega, inertia, tau, h)
    f0, f1, f2 = gyroscopic(inertia, w0, w1, w2, h)
    if f0 != 0.0 or f1 != 0.0 or f2 != 0.0:
        y = gyro_solve(inertia, w0, w1, w2, h, f0, f1, f2)
        w0, w1, w2 = w0 - y[0], w1 - y[1], w2 - y[2]
    ww = quat_rotate(q, w0, w1, w2)
    omega[0], omega[1], omega[2] = ww[0], ww[1], ww[2]


@jit(borrow=True)
def free_spin(q, omega, inertia, tau, h):
    """``w1 = R^T omega + h I^-1 R^T tau``: the body-frame angular velocity
    after ``h`` under the torque ``tau`` alone (a tuple)."""
    tb = quat_unrotate(q, tau[0], tau[1], tau[2])
    wb = quat_unrotate(q, omega[0], omega[1], omega[2])
    return (wb[0] + h * tb[0] / inertia[0], wb[1] + h * tb[1] / inertia[1],
            wb[2] + h * tb[2] / inertia[2])


@jit(borrow=True)
def gyroscopic(inertia, w0, w1, w2, h):
    """``h w x (I w)`` (body frame, a tuple; zero at ``w = 0``, also for a
    body of infinite inertia)."""
    if w0 == 0.0 and w1 == 0.0 and w2 == 0.0:
        return 0.0, 0.0, 0.0
    l0, l1, l2 = inertia[0] * w0, inertia[1] * w1, inertia[2] * w2
    return h * (w1 * l2 - w2 * l1), h * (w2 * l0 - w0 * l2), h * (w0 * l1 - w1 * l0)


@jit(borrow=True)
def gyro_solve(inertia, w0, w1, w2, h, r0, r1, r2):
    """``J^-1 r`` with ``J = I + h ([w]x I - [I w]x)``, the Jacobian of the
    implicit gyroscopic equation at ``w`` (body frame; by cofactors)."""
    i0, i1, i2 = inertia[0], inertia[1], inertia[2]
    l0, l1, l2 = i0 * w0, i1 * w1, i2 * w2
    j00 = i0
    j01 = h * (-w2 * i1 + l2)
    j02 = h * (w1 * i2 - l1)
    j10 = h * (w2 * i0 - l2)
    j11 = i1
    j12 = h * (-w0 * i2 + l0)
    j20 = h * (-w1 * i0 + l1)
    j21 = h * (w0 * i1 - l0)
    j22 = i2
    c00 = j11 * j22 - j12 * j21
    c01 = j02 * j21 - j01 * j22
    c02 = j01 * j12 - j02 * j11
    det = j00 * c00 + j10 * c01 + j20 * c02
    c10 = j12 * j20 - j10 * j22
    c11 = j00 * j22 - j02 * j20
    c12 = j02 * j10 - j00 * j12
    c20 = j10 * j21 - j11 * j20
    c21 = j01 * j20 - j00 * j21
    c22 = j00 * j11 - j01 * j10
    return ((c00 * r0 + c01 * r1 + c02 * r2) / det, (c10 * r0 + c11 * r1 + c12 * r2) / det,
            (c20 * r0 + c21 * r1 + c22 * r2) / det)


@jit(borrow=True, python=True)
def integrate_orientation(q, w0, w1, w2, h):
    """``q <- exp(h w / 2) q`` for a constant world angular velocity ``w``
    over ``h``: the exact rotation by the angle ``h |w|`` about ``w``."""
    wn = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    half = 0.5 * h * wn
    if wn > 0.0:
        s = np.sin(half) / wn
        c = np.cos(half)
    else:
        s = 0.5 * h
        c = 1.0
    a0, a1, a2 = s * w0, s * w1, s * w2
    qw, qx, qy, qz = q[0], q[1], q[2], q[3]
    nw = c * qw - a0 * qx - a1 * qy - a2 * qz
    nx = c * qx + a0 * qw + a1 * qz - a2 * qy
    ny = c * qy - a0 * qz + a1 * qw + a2 * qx
    nz = c * qz + a0 * qy - a1 * qx + a2 * qw
    norm = np.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
    q[0], q[1], q[2], q[3] = nw / norm, nx / norm, ny / norm, nz / norm


def quat_rate(q0, q1, span):
    """The world angular velocity [rad/s] that turns ``q0`` into ``q1`` in
    ``span`` seconds at a constant rate (``(..., 4)`` rows, scalar first):
    the rotation vector of ``q1 q0*`` over ``span``; the shorter way round."""
    q0, q1 = np.asarray(q0, np.float64), np.asarray(q1, np.float64)
    w0, v0 = q0[..., :1], -q0[..., 1:]
    w1, v1 = q1[..., :1], q1[..., 1:]
    w = w1 * w0 - np.sum(v1 * v0, axis=-1, keepdims=True)
    v = w1 * v0 + w0 * v1 + np.cross(v1, v0)
    v = np.where(w < 0, -v, v)
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, np.abs(w))
    return np.where(s > 0, v / np.where(s > 0, s, 1.0), 0.0) * angle / span


def window_state(tt, pos, quat=None):
    """The state at ``t = 0`` that best fits a window of measured poses
    (times ``tt (n,)`` [s] around 0, positions ``pos (n, nb, 3)``,
    orientations ``quat (n, nb, 4)`` or None): the least-squares quadratic
    through the positions (its value and slope: exact in flight under
    gravity), and the least-squares constant world rate through the rotation
    vectors of ``quat[i] quat[c]*`` (``c``: the sample nearest 0), whose
    intercept corrects the orientation (exact for a body spinning freely
    about a principal axis or with isotropic inertia, as a cube).  Averaging
    the window cuts the noise of a single measured pose and of a chord.
    Returns ``pos0, vel, quat0, omega`` (quat0 and omega None without
    ``quat``)."""
    tt = np.asarray(tt, np.float64)
    n = tt.size
    pos = np.asarray(pos, np.float64)
    vand = np.stack([np.ones_like(tt), tt, tt * tt], axis=1)
    coef = np.linalg.lstsq(vand, pos.reshape(n, -1), rcond=None)[0]
    pos0, vel = coef[0].reshape(pos.shape[1:]), coef[1].reshape(pos.shape[1:])
    if quat is None:
        return pos0, vel, None, None
    quat = np.asarray(quat, np.float64)
    c = int(np.argmin(np.abs(tt)))
    rot = quat_rate(quat[c][None], quat, 1.0)  # (n, nb, 3): from sample c to each
    lin = np.linalg.lstsq(vand[:, :2], rot.reshape(n, -1), rcond=None)[0]
    r0, omega = lin[0].reshape(rot.shape[1:]), lin[1].reshape(rot.shape[1:])
    quat0 = quat[c].copy()
    for i in range(quat0.shape[0]):
        integrate_orientation(quat0[i], r0[i, 0], r0[i, 1], r0[i, 2], 1.0)
    return pos0, vel, quat0, omega


def quat_matrix(q):
    """The rotation matrix ``R(q)`` (3, 3) of a unit quaternion (scalar first)."""
    w, x, y, z = (float(c) for c in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quat_angle(qa, qb):
    """The geodesic angle [rad] between two orientations:
    ``2 atan2(|vec(qa qb*)|, |w(qa qb*)|)``."""
    qa = np.asarray(qa, np.float64)
    qb = np.asarray(qb, np.float64)
    w = (qa[..., 0] * qb[..., 0] + qa[..., 1] * qb[..., 1] + qa[..., 2] * qb[..., 2]
         + qa[..., 3] * qb[..., 3])
    # vec(qa conj(qb)) = -wa vb + wb va - va x vb
    va, vb = qa[..., 1:], qb[..., 1:]
    vec = (qb[..., :1] * va - qa[..., :1] * vb - np.cross(va, vb))
    return 2.0 * np.arctan2(np.linalg.norm(vec, axis=-1), np.abs(w))
