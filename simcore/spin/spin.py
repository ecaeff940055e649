"""Spinning spheres on cloth: motion states, their closed-form motion and transition times.

The model of ``dataset.yaml`` ``model: {spin: true}`` (pooltool 0.6's
ball motion, ``physics/evolve``; Han 2005; Alciatore).  A sphere of radius
``R``, mass ``m`` and moment of inertia ``I = 2/5 m R^2`` (solid) rests on
the ground ``z = ground + R``; world frame, ``z`` up, SI units.  Its state is
the centre ``r``, the velocity ``v`` (``v_z = 0``) and the angular velocity
``w`` [rad/s], and one motion state:

``SLIDING``
    The contact point slips: ``u = v + w x (-R z) = (v_x - R w_y, v_y + R w_x, 0)``.
    Kinetic friction ``-mu m g u_hat`` acts at the contact point with ``u_hat``
    fixed over the slide (``du/dt = -7/2 mu g u_hat``, parallel to ``u``), so::

        r(s) = r + v s - 1/2 mu g s^2 u_hat,    v(s) = v - mu g s u_hat,
        w_xy(s) = w_xy - 5/(2R) mu g s (u_hat x z)

    and the slide ends (``slide_roll``) when ``u`` reaches 0, after
    ``2 |u| / (7 mu g)``.  ``mu`` is ``mu_k`` while ``|u| >= v_th`` and ``mu_s``
    below (the patent's speed switch, on the slip speed; a tiny ``v_th``
    turns it off, as pooltool has none): the crossing splits the slide at
    ``(|u| - v_th) / (7/2 mu_k g)`` without an event in the log.
``ROLLING``
    No slip, ``w_xy = (z x v) / R``; rolling resistance decelerates the ball
    along ``-v_hat`` at ``mu_r g`` until it stops after ``|v| / (mu_r g)``:
    ``roll_rest`` if no vertical spin is left then, else ``roll_spin``.
``SPINNING``
    At rest (``v = 0``, ``w_xy = 0``) spinning about ``z``; ``spin_rest``
    when the spin is gone.
``STATIONARY``
    Nothing moves.

Pushes (control forces ``F`` at the centre, :func:`pushed_segment`): the
cloth carries ``N = m g - F_z`` (``g_n = N / m`` replaces ``g`` in every
friction above).  A sliding ball's slip then obeys ``du/dt = F_h/m - 7/2
mu g_n u_hat``: ``u_hat`` turns unless the push is along the slip, so the
slide is taken in steps of at most the scenario's ``dt`` with the direction
at the step's end (backward Euler: ``u_hat`` along ``u + F_h/m s``), each
ending early, exactly, where the slip reaches 0 (or crosses ``v_th``)
along it; a push along the slip keeps every step exact.  A rolling ball stays
rolling while static friction can supply the force the rolling constraint
needs, ``|F_h| / 3.5 <= mu_s N`` (``m du/dt = F_h + 7/2 f = 0``); it then
accelerates at ``5/7 F_h/m`` less rolling resistance (steps as above when
they cross).  A stronger push makes it slip (``roll_slide``); a push moves a
ball at rest (``start``: rolling within the same bound, else sliding)
unless static friction and rolling resistance hold it.

In every state the vertical spin decays towards 0 at ``5 mu_sp g / (2R)``
rad/s^2 (pooltool's ``u_sp`` as pooltool writes the rate,
``_evolve_perpendicular_spin_component``; pooltool sets ``u_sp = 0.444 R``,
so ``mu_sp`` is a length [m] in its formula and the rate is taken as the
number that formula gives in SI units); it stops at 0 without an event
unless the ball is spinning in place.

Reconstructions.  The state codes are pooltool's (``constants.py``:
stationary 0, spinning 1, sliding 2, rolling 3).  Every transition is an
event at its closed-form time, as in pooltool's event-based engine; between
events each ball's acceleration is constant, so times of impact are the
roots of the same polynomials as the sliding model's
(:mod:`simcore.geometry.collision`).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter

NAME = "spin"

STATIONARY = 0
SPINNING = 1
SLIDING = 2
ROLLING = 3
#: The motion state names, by code (pooltool's ``motion_state`` column).
STATE_NAMES = ("stationary", "spinning", "sliding", "rolling")

#: What ends a ball's segment (``segment`` returns it with the time).
END_NONE = 0
END_VTH = 1
END_SLIDE = 2
END_ROLL = 3
END_SPIN = 4
#: A push's step ends: the direction is taken again (no event).
END_STEP = 5
#: A push sets a ball at rest in motion, or makes a rolling ball slip.
END_SET_OFF = 6
#: A torque about z drives the vertical spin through zero: it is set to 0
#: exactly there (the crossing time's rounding would leave it a hair short,
#: and the next segment would end at once, again and again; no event).
END_SPIN_ZERO = 7

#: Moment of inertia of a solid sphere over ``m R^2``.
INERTIA = 0.4
#: Slip speeds [m/s] at or below which a ball counts as not slipping.
SLIP_ZERO = 1e-12

#: The coefficients only the spinning model reads (per ground material).
PARAMETERS = (
    Parameter("mu_r", 0.01, (0.0, np.inf), "1",
              "rolling resistance: a rolling ball decelerates at mu_r g (spin model)",
              "rolling segment", "ground", -1, model=NAME),
    Parameter("mu_sp", 0.01, (0.0, np.inf), "m",
              "spinning friction: the vertical spin decays at 5 mu_sp g / (2R) rad/s^2 "
              "(pooltool's u_sp; spin model)",
              "ball with vertical spin", "ground", -1, model=NAME),
)


@jit(borrow=True)
def slip(v, w, radius):
    """The contact point's velocity over the cloth, ``u = v + w x (-R z)``
    (its horizontal part; the vertical one is ``v_z = 0``)."""
    return v[0] - radius * w[1], v[1] + radius * w[0]


@jit(borrow=True)
def spin_rate(mu_sp, gravity, radius):
    """The vertical spin's deceleration, ``5 mu_sp g / (2R)`` [rad/s^2]."""
    return 2.5 * mu_sp * gravity / radius


@jit(borrow=True)
def classify(v, w, radius):
    """The motion state of a ball with velocity ``v`` and spin ``w`` on the
    cloth: sliding while its contact point slips, else rolling while it
    moves, else spinning or stationary."""
    ux, uy = slip(v, w, radius)
    if ux * ux + uy * uy > SLIP_ZERO * SLIP_ZERO:
        return SLIDING
    if v[0] != 0.0 or v[1] != 0.0:
        return ROLLING
    return SPINNING if w[2] != 0.0 else STATIONARY


@jit(borrow=True)
def segment(state, above, v, w, radius, gravity, cloth, acc, alpha):
    """The constant accelerations of a ball over its segment and how long
    the segment can last, on the cloth ``(mu_k, mu_s, v_th, mu_r, mu_sp)``
    under the ball: writes ``acc (3,)`` [m/s^2] and ``alpha (3,)``
    (the angular acceleration of ``w_x``, ``w_y`` while sliding, and the
    signed rate of ``w_z``, rad/s^2); returns ``(duration, END_*)``
    (``inf``, ``END_NONE`` for a ball at rest).  ``above``: a slide in the
    ``mu_k`` regime (its slip was ``>= v_th`` when it started or was hit);
    it ends with ``END_VTH`` at the crossing, whatever the coefficients (the
    split must not depend on their values, for ``d/d mu_s``)."""
    mu_k, mu_s, v_th, mu_r, mu_sp = cloth
    for d in range(3):
        acc[d] = 0.0
        alpha[d] = 0.0
    rate = spin_rate(mu_sp, gravity, radius)
    if w[2] > 0.0:
        alpha[2] = -rate
    elif w[2] < 0.0:
        alpha[2] = rate
    if state == SLIDING:
        ux, uy = slip(v, w, radius)
        speed = np.sqrt(ux * ux + uy * uy)
        if speed <= 0.0:
            return 0.0, END_SLIDE
        mu = mu_k if above else mu_s
        if mu <= 0.0:
            return np.inf, END_NONE
        hx = ux / speed
        hy = uy / speed
        acc[0] = -mu * gravity * hx
        acc[1] = -mu * gravity * hy
        # dw/dt = -5/(2R) mu g (u_hat x z) = -5/(2R) mu g (u_hat_y, -u_hat_x, 0)
        k = 2.5 * mu * gravity / radius
        alpha[0] = -k * hy
        alpha[1] = k * hx
        if above:
            return (speed - v_th) / (3.5 * mu_k * gravity), END_VTH
        return speed / (3.5 * mu * gravity), END_SLIDE
    if state == ROLLING:
        speed = np.sqrt(v[0] * v[0] + v[1] * v[1])
        if speed <= 0.0:
            return 0.0, END_ROLL
        if mu_r <= 0.0:
            return np.inf, END_NONE
        acc[0] = -mu_r * gravity * v[0] / speed
        acc[1] = -mu_r * gravity * v[1] / speed
        return speed / (mu_r * gravity), END_ROLL
    if state == SPINNING:
        if rate <= 0.0:
            return np.inf, END_NONE
        return abs(w[2]) / rate, END_SPIN
    return np.inf, END_NONE


@jit(borrow=True)
def _first_crossing(ax, ay, cx, cy, sigma, k, rising):
    """The first ``s > 0`` at which ``|a + c s| - k s`` falls to ``sigma``
    (``rising``: rises to it); ``inf`` when it never does.  The roots of
    ``(c.c - k^2) s^2 + 2 (a.c - sigma k) s + a.a - sigma^2``."""
    qa = cx * cx + cy * cy - k * k
    qb = 2.0 * (ax * cx + ay * cy - sigma * k)
    qc = ax * ax + ay * ay - sigma * sigma
    best = np.inf
    if qa == 0.0:
        if qb != 0.0 and -qc / qb > 0.0:
            best = -qc / qb
    else:
        disc = qb * qb - 4.0 * qa * qc
        if disc >= 0.0:
            root = np.sqrt(disc)
            q = -0.5 * (qb + (root if qb >= 0.0 else -root))
            for s in (q / qa, qc / q if q != 0.0 else np.inf):
                if 0.0 < s < best:
                    # the sign of the quadratic's slope says which way it crosses
                    if (2.0 * qa * s + qb > 0.0) == rising:
                        best = s
    return best


@jit(borrow=True)
def _spin_torque(wz, taz, rate):
    """The vertical spin's rate under the torque ``taz`` (over I) and the
    spinning friction ``rate``: ``(alpha_z, s)``, ``s`` the time to a zero
    crossing the torque drives (inf: none)."""
    if wz != 0.0:
        net = taz - (rate if wz > 0.0 else -rate)
        if taz != 0.0 and net * wz < 0.0:
            return net, abs(wz) / abs(net)
        return net, np.inf
    if abs(taz) > rate:
        return taz - (rate if taz > 0.0 else -rate), np.inf
    return 0.0, np.inf


@jit(borrow=True)
def _pushes_of(push, radius, gravity):
    """A push's terms: the normal force over mass ``g_n``, the slip's
    acceleration ``c = F_h/m + (tau/I) x (-R z)`` and the rolling
    acceleration ``a_p = F_h/m - c / 3.5`` (tuples)."""
    gn = gravity - push[2]
    cx = push[0] - radius * push[4]
    cy = push[1] + radius * push[3]
    return gn, (cx, cy), (push[0] - cx / 3.5, push[1] - cy / 3.5)


@jit(borrow=True)
def pushed_segment(state, above, v, w, radius, gravity, push, cloth, step, acc, alpha):
    """:func:`segment` under a push (``push (6,)`` = F/m [m/s^2] and tau/I
    [rad/s^2], see the module; ``g_n = gravity - push_z > 0``): at most
    ``step`` [s] where a direction turns, ``END_STEP``; at the vertical
    spin's zero crossing under a torque, ``END_SPIN_ZERO``; ``END_SET_OFF``
    (duration 0) where the push moves a ball at rest or makes a rolling one
    slip."""
    mu_k, mu_s, v_th, mu_r, mu_sp = cloth
    for d in range(3):
        acc[d] = 0.0
        alpha[d] = 0.0
    gn, c, ap = _pushes_of(push, radius, gravity)
    rate = spin_rate(mu_sp, gn, radius)
    alpha[2], spin_end = _spin_torque(w[2], push[5], rate)
    held = np.sqrt(c[0] * c[0] + c[1] * c[1]) <= 3.5 * mu_s * gn
    if state == SLIDING:
        ux, uy = slip(v, w, radius)
        mu = mu_k if above else mu_s
        k = 3.5 * mu * gn
        down = _first_crossing(ux, uy, c[0], c[1], v_th if above else 0.0, k, False)
        up = np.inf if above else _first_crossing(ux, uy, c[0], c[1], v_th, k, True)
        s = min(down, up, step, spin_end)
        ex, ey = ux + c[0] * s, uy + c[1] * s
        norm = np.sqrt(ex * ex + ey * ey)
        if norm == 0.0:
            return 0.0, END_SLIDE
        hx, hy = ex / norm, ey / norm
        acc[0] = push[0] - mu * gn * hx
        acc[1] = push[1] - mu * gn * hy
        kw = 2.5 * mu * gn / radius
        alpha[0] = push[3] - kw * hy
        alpha[1] = push[4] + kw * hx
        if s == down:
            return s, END_VTH if above else END_SLIDE
        if s == up:
            return s, END_VTH
        return s, END_SPIN_ZERO if s == spin_end else END_STEP
    if state == ROLLING and not held:
        return 0.0, END_SET_OFF
    # rolling (or at rest) under the static friction the constraint needs
    k = mu_r * gn
    if state != ROLLING:
        if held and np.sqrt(ap[0] * ap[0] + ap[1] * ap[1]) <= k:
            if state == STATIONARY and alpha[2] != 0.0:
                return 0.0, END_SET_OFF  # the torque sets it spinning
            if state == SPINNING and alpha[2] * w[2] < 0.0:
                return abs(w[2]) / abs(alpha[2]), END_SPIN
            return spin_end, END_SPIN_ZERO if spin_end < np.inf else END_NONE
        return 0.0, END_SET_OFF
    stop = _first_crossing(v[0], v[1], ap[0], ap[1], 0.0, k, False)
    s = min(stop, step, spin_end)
    ex, ey = v[0] + ap[0] * s, v[1] + ap[1] * s
    norm = np.sqrt(ex * ex + ey * ey)
    if norm == 0.0:
        return 0.0, END_ROLL
    acc[0] = ap[0] - k * ex / norm
    acc[1] = ap[1] - k * ey / norm
    if s == stop:
        return s, END_ROLL
    return s, END_SPIN_ZERO if s == spin_end else END_STEP


@jit(borrow=True)
def set_off(state, push, radius, gravity, mu_s, mu_r, mu_sp):
    """The state a push puts a ball at rest, or rolling, into: rolling while
    static friction holds the rolling constraint (``|c| <= 3.5 mu_s g_n``)
    and the push beats rolling resistance, else sliding; spinning in place
    when only the torque about z beats the spinning friction."""
    gn, c, ap = _pushes_of(push, radius, gravity)
    if np.sqrt(c[0] * c[0] + c[1] * c[1]) > 3.5 * mu_s * gn:
        return SLIDING
    if state == ROLLING or np.sqrt(ap[0] * ap[0] + ap[1] * ap[1]) > mu_r * gn:
        return ROLLING
    return SPINNING


@jit(borrow=True)
def spin_z(wz, rate, s):
    """The vertical spin after ``s``: decays towards 0 at ``rate`` and stays there."""
    if wz > 0.0:
        return max(wz - rate * s, 0.0)
    if wz < 0.0:
        return min(wz + rate * s, 0.0)
    return wz


@jit(borrow=True)
def advance(state, pos, vel, w, acc, alpha, radius, s, out_pos, out_vel, out_w):
    """The state ``s`` into a segment (``acc``, ``alpha`` from :func:`segment`),
    into ``out_*`` (which may be the inputs themselves)."""
    p0 = pos[0] + vel[0] * s + 0.5 * acc[0] * s * s
    p1 = pos[1] + vel[1] * s + 0.5 * acc[1] * s * s
    v0 = vel[0] + acc[0] * s
    v1 = vel[1] + acc[1] * s
    if alpha[2] != 0.0 and (w[2] == 0.0 or (alpha[2] > 0.0) == (w[2] > 0.0)):
        wz = w[2] + alpha[2] * s  # a torque spins it up
    else:
        wz = spin_z(w[2], abs(alpha[2]), s)
    if state == ROLLING:
        wx = -v1 / radius
        wy = v0 / radius
    else:
        wx = w[0] + alpha[0] * s
        wy = w[1] + alpha[1] * s
    out_pos[0] = p0
    out_pos[1] = p1
    out_pos[2] = pos[2]
    out_vel[0] = v0
    out_vel[1] = v1
    out_vel[2] = 0.0
    out_w[0] = wx
    out_w[1] = wy
    out_w[2] = wz
