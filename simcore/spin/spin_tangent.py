"""Forward-mode sensitivities of the spinning model (tangents), stage by stage.

As in :mod:`simcore.sliding.tangent`, the tangents are event-indexed: ``tp``,
``tv``, ``tw (nb, 3, NT)`` are the derivatives of every ball's position,
velocity and spin right after the last event, at time ``tau`` (tangent
``ttau (NT,)``), along ``NT`` directions (coefficients, initial velocities).

Segments (:mod:`simcore.spin.spin`).  Over a segment each ball's acceleration
``a`` and spin acceleration ``alpha`` are constant functions of its state at
the segment's start and of the coefficients: sliding ``a = -mu g u_hat``
with ``d u_hat = (I - u_hat u_hat^T) du / |u|``, ``du = (dv_x - R dw_y,
dv_y + R dw_x)``; rolling ``a = -mu_r g v_hat``; the vertical spin's rate
``-sign(w_z) 5 mu_sp g / (2R)``.  At a fixed ``s`` into the segment::

    dr(s) = dr + dv s + da s^2 / 2,   dv(s) = dv + da s,
    dw_xy(s) = dw_xy + dalpha_xy s (sliding), z x dv(s) / R (rolling),

and ``dw_z`` likewise until the spin has decayed to zero (then 0).

Event times.  A transition ends its segment after a closed-form duration
(``2|u| / (7 mu g)``, ``|v| / (mu_r g)``, ``|w_z| / rate``, the ``v_th``
crossing), whose tangent is taken directly; an impact at the root of its
gap, ``ds = -(dg/dx . dx(s)) / (dg/ds)``; the end of the run at a fixed
time, ``ds = -dtau``.  The state just before the event has the tangent
``dx(s) + xdot(s) ds``, and ``tau`` moves by ``ds``; a sample at the fixed
time ``tau + s_q`` has ``dx(s_q) - xdot(s_q) dtau``.

Impacts by a complex step (Squire and Trapp 1998; Martins et al. 2003):
pooltool's separation, the impact normal and the impact law
(:mod:`simcore.spin.spin_impact`, :mod:`simcore.laws.stronge`) take complex numbers,
and ``Im f(x + i h dx) / h`` is the directional derivative of the whole
resolution along ``dx``, exact to rounding for any ``h`` small enough
(no subtraction, so no cancellation); ``h = 1e-20``.  The slip-onset roots
of Stronge's law carry their derivative through a Newton step (the
implicit function theorem).  Coulomb's stick/slip choice, the regime of
Stronge's law and the motion states are decided on the real parts: their
switches are the model's kinks, where the tangent is one-sided.
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import jit
from ..laws.registry import PairLaw
from . import spin, spin_impact

#: The complex step.
STEP = 1e-20


class SpinTangents(NamedTuple):
    """A scenario's tangents (``NT`` directions): the state's ``tp``, ``tv``,
    ``tw`` and its segment's ``ta``, ``tal (nb, 3, NT)``, each ball's segment
    duration ``tdur (nb, NT)``, the last event time's ``ttau (NT,)``, an
    event's velocity changes ``tdva``, ``tdvb (3, NT)``, a sample's
    ``tsamp (nb, 3, NT)``, where each coefficient row's direction is:
    ``pdir (nparam,)`` (-1: none), and the pushes' ``tpush (nb, 3, NT)``
    (the tangent of each ball's control force over its mass, this pass)."""

    tp: np.ndarray
    tv: np.ndarray
    tw: np.ndarray
    ta: np.ndarray
    tal: np.ndarray
    tdur: np.ndarray
    ttau: np.ndarray
    tdva: np.ndarray
    tdvb: np.ndarray
    tsamp: np.ndarray
    pdir: np.ndarray
    tpush: np.ndarray


@jit
def scratch(nb, nt, nparam, t_param, t_vel, t_omega):
    """The tangents of a scenario, seeded: direction ``p`` moves coefficient
    row ``t_param[p]``, the initial velocity ``vel[q // 3, q % 3]`` for
    ``q = t_vel[p]`` (horizontal components only: the balls stay on the
    cloth), or the initial spin ``w[q // 3, q % 3]`` for ``q = t_omega[p]``."""
    buf = np.zeros((7, nb, 3, nt))
    pdir = np.full(nparam, -1, np.int64)
    for p in range(nt):
        if t_param[p] >= 0:
            pdir[t_param[p]] = p
        q = t_vel[p]
        if q >= 0 and q // 3 < nb and q % 3 < 2:
            buf[1, q // 3, q % 3, p] = 1.0
        q = t_omega[p]
        if q >= 0 and q // 3 < nb:
            buf[2, q // 3, q % 3, p] = 1.0
    return SpinTangents(buf[0], buf[1], buf[2], buf[3], buf[4], np.zeros((nb, nt)),
                        np.zeros(nt), np.zeros((3, nt)), np.zeros((3, nt)), buf[5], pdir, buf[6])


@jit(borrow=True)
def enter(i, state, radius, tg):
    """Ball i's tangents on entering ``state`` (``spin_engine._enter``): a
    rolling ball's spin follows its velocity; a ball at rest stays there to
    first order (a small push or horizontal spin moves it by its square, as
    the slide it starts stops again), so its velocity and horizontal spin
    have no tangent."""
    tv, tw = tg.tv, tg.tw
    for p in range(tv.shape[2]):
        if state != spin.SLIDING:
            _settle(i, p, state == spin.ROLLING, radius, tv, tw)


@jit(borrow=True)
def _settle(i, p, rolling, radius, tv, tw):
    """Ball i's tangents along direction p once it no longer slides: a
    rolling ball's horizontal spin follows its velocity, ``w_xy = (z x v) / R``;
    a ball at rest has neither."""
    if rolling:
        tw[i, 0, p] = -tv[i, 1, p] / radius
        tw[i, 1, p] = tv[i, 0, p] / radius
    else:
        for d in range(2):
            tv[i, d, p] = 0.0
            tw[i, d, p] = 0.0


@jit(borrow=True)
def segment(i, state, above, v, w, radius, gravity, coef, dirs, dur, end, tg):
    """Tangents of ball i's segment (``spin.segment``): ``ta[i]``, ``tal[i]``
    and ``tdur[i]``.  ``coef = (mu_s, mu_k, v_th, mu_r, mu_sp)`` and
    ``dirs`` their directions (-1: fixed)."""
    mu_s, mu_k, v_th, mu_r, mu_sp = coef
    d_s, d_k, d_th, d_r, d_sp = dirs
    tv, tw, ta, tal, tdur = tg.tv, tg.tw, tg.ta, tg.tal, tg.tdur
    nt = tv.shape[2]
    rate = spin.spin_rate(mu_sp, gravity, radius)
    sgn = 1.0 if w[2] > 0.0 else (-1.0 if w[2] < 0.0 else 0.0)
    for p in range(nt):
        for d in range(3):
            ta[i, d, p] = 0.0
            tal[i, d, p] = 0.0
        tdur[i, p] = 0.0
        # The vertical spin's rate, -sign(w_z) 5 mu_sp g / (2R), in every state.
        tal[i, 2, p] = -sgn * 2.5 * gravity / radius * (1.0 if p == d_sp else 0.0)
    if state == spin.SLIDING:
        ux, uy = spin.slip(v, w, radius)
        su = np.sqrt(ux * ux + uy * uy)
        if su <= 0.0:
            return
        hx, hy = ux / su, uy / su
        mu = mu_k if above else mu_s
        d_mu = d_k if above else d_s
        k = 2.5 * mu * gravity / radius
        for p in range(nt):
            dux = tv[i, 0, p] - radius * tw[i, 1, p]
            duy = tv[i, 1, p] + radius * tw[i, 0, p]
            along = hx * dux + hy * duy
            dhx = (dux - along * hx) / su
            dhy = (duy - along * hy) / su
            dmu = 1.0 if p == d_mu else 0.0
            ta[i, 0, p] = -gravity * (dmu * hx + mu * dhx)
            ta[i, 1, p] = -gravity * (dmu * hy + mu * dhy)
            dk = 2.5 * gravity / radius * dmu
            tal[i, 0, p] = -(dk * hy + k * dhy)
            tal[i, 1, p] = dk * hx + k * dhx
            if end == spin.END_VTH:
                dmk = 1.0 if p == d_k else 0.0
                dth = 1.0 if p == d_th else 0.0
                tdur[i, p] = ((along - dth) / (3.5 * mu_k * gravity)
                              - (su - v_th) * dmk / (3.5 * mu_k * mu_k * gravity))
            else:
                tdur[i, p] = along / (3.5 * mu * gravity) - su * dmu / (3.5 * mu * mu * gravity)
    elif state == spin.ROLLING:
        sv = np.sqrt(v[0] * v[0] + v[1] * v[1])
        if sv <= 0.0:
            return
        hx, hy = v[0] / sv, v[1] / sv
        for p in range(nt):
            along = hx * tv[i, 0, p] + hy * tv[i, 1, p]
            dhx = (tv[i, 0, p] - along * hx) / sv
            dhy = (tv[i, 1, p] - along * hy) / sv
            dmu = 1.0 if p == d_r else 0.0
            ta[i, 0, p] = -gravity * (dmu * hx + mu_r * dhx)
            ta[i, 1, p] = -gravity * (dmu * hy + mu_r * dhy)
            tdur[i, p] = along / (mu_r * gravity) - sv * dmu / (mu_r * mu_r * gravity)
    elif state == spin.SPINNING and rate > 0.0:
        for p in range(nt):
            drate = 2.5 * gravity / radius * (1.0 if p == d_sp else 0.0)
            tdur[i, p] = sgn * tw[i, 2, p] / rate - abs(w[2]) * drate / (rate * rate)


@jit(borrow=True)
def _crossing(ex, ey, cx, cy, k, s, dex, dey, dk, dsigma):
    """The tangent of a crossing time ``s`` of ``|e(s)| - k s = sigma``
    (``e(s) = e0 + c s``; :func:`spin._first_crossing`), by the implicit
    function theorem: ``ds = -(h . de - s dk - dsigma) / (h . c - k)``,
    ``h = e(s) / |e(s)|``, ``de`` the tangent of ``e(s)`` at a fixed ``s``.
    0 where the speed only touches ``sigma`` (``h . c = k``: a kink)."""
    size = np.sqrt(ex * ex + ey * ey)
    hx, hy = ex / size, ey / size
    slope = hx * cx + hy * cy - k
    if slope == 0.0:
        return 0.0
    return -(hx * dex + hy * dey - s * dk - dsigma) / slope


@jit(borrow=True)
def _spin_torque(wz, taz, rate, dwz, drate):
    """Tangents of :func:`spin._spin_torque`'s ``(alpha_z, s)`` along a
    direction moving ``w_z`` by ``dwz`` and the spinning friction's rate by
    ``drate``."""
    if wz != 0.0:
        sgn = 1.0 if wz > 0.0 else -1.0
        net = taz - sgn * rate
        dnet = -sgn * drate
        if taz != 0.0 and net * wz < 0.0:
            # s = |w_z| / |net|
            return dnet, (sgn * dwz - abs(wz) * dnet / net) / abs(net)
        return dnet, 0.0
    if abs(taz) > rate:
        return -(1.0 if taz > 0.0 else -1.0) * drate, 0.0
    return 0.0, 0.0


@jit(borrow=True)
def _stepped(crossed, e, c, k, s, de, dk, dsigma, step, dspin):
    """A pushed segment's length tangent ``ds`` (at a crossing of the speed
    when ``crossed``, :func:`_crossing`; 0 for a fixed step; ``dspin`` at
    the spin's zero crossing) and its direction ``h = e(s) / |e(s)|`` with
    the tangent ``dh = (I - h h^T)(de + c ds) / |e(s)|`` (``de`` at a fixed
    ``s``; ``e``, ``c``, ``de`` as ``(x, y)`` pairs): ``(ds, h_x, h_y,
    dh_x, dh_y)``."""
    ex, ey = e
    cx, cy = c
    dex, dey = de
    if crossed:
        ds = _crossing(ex, ey, cx, cy, k, s, dex, dey, dk, dsigma)
    elif s == step:
        ds = 0.0
    else:
        ds = dspin
    size = np.sqrt(ex * ex + ey * ey)
    hx, hy = ex / size, ey / size
    fx, fy = dex + cx * ds, dey + cy * ds
    along = hx * fx + hy * fy
    return ds, hx, hy, (fx - along * hx) / size, (fy - along * hy) / size


@jit(borrow=True)
def pushed_segment(i, state, above, v, w, radius, gravity, pushed, coef, dirs, seg, tg):
    """Tangents of ball i's segment under a push (``spin.pushed_segment``;
    ``pushed = (push (6,), step)``, ``seg = (duration, END_*)`` as the forward
    found them): ``ta[i]``, ``tal[i]``, ``tdur[i]``.  The coefficients
    move the friction terms and the segment's length; a direction on a
    control's force moves the push itself (``tpush[i]``: its force over
    mass), hence ``g_n = g - F_z/m``, the slip's acceleration ``c`` and the
    rolling one ``a_p``.  A slide's direction is that of the slip at the
    segment's end, ``e = u + c s``: ``dh = (I - h h^T)(du + dc s + c ds) /
    |e|``; its length is a fixed step (``ds = 0``), the spin's zero
    crossing, or a crossing of the slip's speed (:func:`_crossing`); a
    rolling ball's likewise with ``e = v + a_p s`` and the rolling
    resistance ``mu_r g_n``."""
    mu_s, mu_k, v_th, mu_r, mu_sp = coef
    d_s, d_k, d_th, d_r, d_sp = dirs
    push, step = pushed
    dur, end = seg
    tv, tw, ta, tal, tdur, tpush = tg.tv, tg.tw, tg.ta, tg.tal, tg.tdur, tg.tpush
    nt = tv.shape[2]
    gn, c, ap = spin._pushes_of(push, radius, gravity)
    rate = spin.spin_rate(mu_sp, gn, radius)
    al, spin_end = spin._spin_torque(w[2], push[5], rate)
    held = np.sqrt(c[0] * c[0] + c[1] * c[1]) <= 3.5 * mu_s * gn
    for p in range(nt):
        for d in range(3):
            ta[i, d, p] = 0.0
            tal[i, d, p] = 0.0
        tdur[i, p] = 0.0
        # the push's tangents (forces only): c = F_h/m + ..., a_p = F_h/m - c / 3.5
        dpx, dpy, dgn = tpush[i, 0, p], tpush[i, 1, p], -tpush[i, 2, p]
        dsp = 1.0 if p == d_sp else 0.0
        drate = 2.5 * (dsp * gn + mu_sp * dgn) / radius
        tal[i, 2, p], dspin = _spin_torque(w[2], push[5], rate, tw[i, 2, p], drate)
        if end == spin.END_SET_OFF or dur == 0.0 or dur == np.inf:
            continue
        s = dur
        if state == spin.SLIDING:
            ux, uy = spin.slip(v, w, radius)
            mu = mu_k if above else mu_s
            dmu = 1.0 if p == (d_k if above else d_s) else 0.0
            k = 3.5 * mu * gn
            dk = 3.5 * (dmu * gn + mu * dgn)
            # the slip at the segment's end and its tangent at a fixed s
            dux = tv[i, 0, p] - radius * tw[i, 1, p] + dpx * s
            duy = tv[i, 1, p] + radius * tw[i, 0, p] + dpy * s
            ex, ey = ux + c[0] * s, uy + c[1] * s
            ds, hx, hy, dhx, dhy = _stepped(
                end == spin.END_VTH or end == spin.END_SLIDE, (ex, ey), (c[0], c[1]), k, s,
                (dux, duy), dk, 1.0 if end == spin.END_VTH and p == d_th else 0.0, step, dspin)
            dmg = dmu * gn + mu * dgn
            ta[i, 0, p] = dpx - (dmg * hx + mu * gn * dhx)
            ta[i, 1, p] = dpy - (dmg * hy + mu * gn * dhy)
            kw = 2.5 * mu * gn / radius
            dkw = 2.5 * dmg / radius
            tal[i, 0, p] = -(dkw * hy + kw * dhy)
            tal[i, 1, p] = dkw * hx + kw * dhx
            tdur[i, p] = ds
        elif state == spin.ROLLING and held:
            k = mu_r * gn
            dk = (1.0 if p == d_r else 0.0) * gn + mu_r * dgn
            dapx, dapy = dpx * (1.0 - 1.0 / 3.5), dpy * (1.0 - 1.0 / 3.5)
            dvx, dvy = tv[i, 0, p] + dapx * s, tv[i, 1, p] + dapy * s
            ex, ey = v[0] + ap[0] * s, v[1] + ap[1] * s
            ds, hx, hy, dhx, dhy = _stepped(end == spin.END_ROLL, (ex, ey), (ap[0], ap[1]), k, s,
                                            (dvx, dvy), dk, 0.0, step, dspin)
            ta[i, 0, p] = dapx - (dk * hx + k * dhx)
            ta[i, 1, p] = dapy - (dk * hy + k * dhy)
            tdur[i, p] = ds
        elif end == spin.END_SPIN or s == spin_end:
            # the spin's zero crossing: s = |w_z| / |alpha_z|
            sgn = 1.0 if w[2] > 0.0 else -1.0
            tdur[i, p] = (sgn * tw[i, 2, p] - abs(w[2]) * tal[i, 2, p] / al) / abs(al)


@jit(borrow=True)
def _fixed(i, p, s, tg):
    """Ball i's position tangent along direction p at a fixed ``s``."""
    tp, tv, ta = tg.tp, tg.tv, tg.ta
    return (tp[i, 0, p] + tv[i, 0, p] * s + 0.5 * ta[i, 0, p] * s * s,
            tp[i, 1, p] + tv[i, 1, p] * s + 0.5 * ta[i, 1, p] * s * s)


@jit(borrow=True)
def impact_time(i, j, s, pos, vel, acc, wall_n, ds, tg):
    """``ds``: the tangent of an impact's time at ``s`` into the segment,
    between balls i and j (``j >= 0``), or of ball i on the wall of normal
    ``wall_n`` (``j < 0``), by the implicit function theorem.  Returns False
    for a grazing impact (no normal speed: not differentiable)."""
    nt = ds.shape[0]
    if j >= 0:
        n0 = 0.0
        n1 = 0.0
        for d in range(2):
            gap = ((pos[j, d] + vel[j, d] * s + 0.5 * acc[j, d] * s * s)
                   - (pos[i, d] + vel[i, d] * s + 0.5 * acc[i, d] * s * s))
            if d == 0:
                n0 = gap
            else:
                n1 = gap
        size = np.sqrt(n0 * n0 + n1 * n1)
        n0 /= size
        n1 /= size
        rate = (n0 * ((vel[j, 0] + acc[j, 0] * s) - (vel[i, 0] + acc[i, 0] * s))
                + n1 * ((vel[j, 1] + acc[j, 1] * s) - (vel[i, 1] + acc[i, 1] * s)))
    else:
        n0 = wall_n[0]
        n1 = wall_n[1]
        rate = n0 * (vel[i, 0] + acc[i, 0] * s) + n1 * (vel[i, 1] + acc[i, 1] * s)
    if rate == 0.0:
        return False
    for p in range(nt):
        xi, yi = _fixed(i, p, s, tg)
        if j >= 0:
            xj, yj = _fixed(j, p, s, tg)
            ds[p] = -(n0 * (xj - xi) + n1 * (yj - yi)) / rate
        else:
            ds[p] = -(n0 * xi + n1 * yi) / rate
    return True


@jit(borrow=True)
def advance(states, vel, w, acc, alpha, radius, s, ds, tg):
    """Every ball's tangents from just after the last event to just before
    the next, ``s`` later (``vel``, ``w``, ``acc``, ``alpha``: the segment's
    start and accelerations; ``ds``: the tangent of ``s``); ``ttau += ds``."""
    tp, tv, tw, ta, tal, ttau = tg.tp, tg.tv, tg.tw, tg.ta, tg.tal, tg.ttau
    nt = ttau.shape[0]
    for i in range(vel.shape[0]):
        st = states[i]
        wz = w[i, 2]
        al = alpha[i, 2]
        # as spin.advance: a torque spinning it up, or a decay not yet at 0
        up = al != 0.0 and (wz == 0.0 or (al > 0.0) == (wz > 0.0))
        live = up or (wz != 0.0 and abs(al) * s < abs(wz))
        for p in range(nt):
            for d in range(2):
                v_s = vel[i, d] + acc[i, d] * s
                tp[i, d, p] += tv[i, d, p] * s + 0.5 * ta[i, d, p] * s * s + v_s * ds[p]
                tv[i, d, p] += ta[i, d, p] * s + acc[i, d] * ds[p]
            if st == spin.SLIDING:
                for d in range(2):
                    tw[i, d, p] += tal[i, d, p] * s + alpha[i, d] * ds[p]
            elif st == spin.ROLLING:
                tw[i, 0, p] = -tv[i, 1, p] / radius[i]
                tw[i, 1, p] = tv[i, 0, p] / radius[i]
            if live:
                tw[i, 2, p] += tal[i, 2, p] * s + alpha[i, 2] * ds[p]
            else:
                tw[i, 2, p] = 0.0 if wz != 0.0 else tw[i, 2, p]
    for p in range(nt):
        ttau[p] += ds[p]


@jit(borrow=True)
def sample(vel, acc, s, tg):
    """``tsamp``: the positions' tangents at the fixed time ``s`` after the last event."""
    tp, tv, ta, ttau, out = tg.tp, tg.tv, tg.ta, tg.ttau, tg.tsamp
    for i in range(vel.shape[0]):
        for d in range(2):
            v_s = vel[i, d] + acc[i, d] * s
            for p in range(ttau.shape[0]):
                out[i, d, p] = (tp[i, d, p] + tv[i, d, p] * s + 0.5 * ta[i, d, p] * s * s
                                - v_s * ttau[p])
            # z stays on the cloth.
        for p in range(ttau.shape[0]):
            out[i, 2, p] = 0.0


@jit(borrow=True)
def transition(i, end, state, radius, tg):
    """Ball i's tangents through its transition ``end`` into ``state``
    (``spin_engine._transition``)."""
    tv, tw = tg.tv, tg.tw
    for p in range(tv.shape[2]):
        if end == spin.END_SLIDE:
            _settle(i, p, True, radius, tv, tw)
        elif end != spin.END_VTH:
            _settle(i, p, False, radius, tv, tw)
            if state == spin.STATIONARY:
                tw[i, 2, p] = 0.0


@jit
def _load(a, t, p, out):
    """``out = a + i STEP t[:, p]``: a state vector and its tangent along p."""
    for d in range(3):
        out[d] = complex(a[d], STEP * t[d, p])


@jit
def _store(x, t, p):
    for d in range(3):
        t[d, p] = x[d].imag / STEP


@jit
def pair(i, j, code, row, dirs, moving, pos, vel, w, radius, mass, tg):
    """Balls i, j's tangents through their impact (``spin_engine._ball_ball``:
    separation, normal, law), by a complex step along each direction;
    ``row = (mu_bb, e_bb, mu_bb_b, mu_bb_c)`` and ``dirs`` their directions;
    writes the velocity changes' tangents into ``tdva``, ``tdvb``."""
    tp, tv, tw = tg.tp, tg.tv, tg.tw
    z = np.zeros((10, 3), np.complex128)
    pi, vi, wi, pj, vj, wj, nrm, dva, dwa, dvb = (z[0], z[1], z[2], z[3], z[4], z[5], z[6],
                                                  z[7], z[8], z[9])
    dwb = np.zeros(3, np.complex128)
    for p in range(tv.shape[2]):
        _load(pos[i], tp[i], p, pi)
        _load(vel[i], tv[i], p, vi)
        _load(w[i], tw[i], p, wi)
        _load(pos[j], tp[j], p, pj)
        _load(vel[j], tv[j], p, vj)
        _load(w[j], tw[j], p, wj)
        c = [complex(row[k], STEP if p == dirs[k] else 0.0) for k in range(4)]
        spin_impact.separate_pair(pi, vi, pj, vj, radius[i], radius[j], moving)
        dist = np.sqrt((pj[0] - pi[0]) ** 2 + (pj[1] - pi[1]) ** 2 + (pj[2] - pi[2]) ** 2)
        for d in range(3):
            nrm[d] = (pj[d] - pi[d]) / dist
        law = PairLaw(code, c[1], c[0], c[2], c[3])
        spin_impact.ball_ball(law, (vi, wi, mass[i], radius[i]), (vj, wj, mass[j], radius[j]),
                              nrm, (dva, dwa), (dvb, dwb))
        dva[2] = 0.0
        dvb[2] = 0.0
        for d in range(3):
            tg.tdva[d, p] = dva[d].imag / STEP
            tg.tdvb[d, p] = dvb[d].imag / STEP
            vi[d] += dva[d]
            wi[d] += dwa[d]
            vj[d] += dvb[d]
            wj[d] += dwb[d]
        _store(pi, tp[i], p)
        _store(vi, tv[i], p)
        _store(wi, tw[i], p)
        _store(pj, tp[j], p)
        _store(vj, tv[j], p)
        _store(wj, tw[j], p)


@jit
def wall(i, code, row, dirs, cushion, ground, pos, vel, w, radius, mass, tg):
    """Ball i's tangents through its impact on a wall (``spin_engine._ball_wall``),
    by a complex step; ``row = (mu_w, e_bw, omega_ratio_w)`` and ``dirs``
    their directions; ``cushion = (n, d, h)`` the wall's plane and nose
    height; writes the velocity change's tangent into ``tdva``."""
    n_wall, d_wall, h_wall = cushion
    tp, tv, tw = tg.tp, tg.tv, tg.tw
    z = np.zeros((6, 3), np.complex128)
    pc, vc, wc, nrm, dv, dw = z[0], z[1], z[2], z[3], z[4], z[5]
    for p in range(tv.shape[2]):
        _load(pos[i], tp[i], p, pc)
        _load(vel[i], tv[i], p, vc)
        _load(w[i], tw[i], p, wc)
        c = [complex(row[k], STEP if p == dirs[k] else 0.0) for k in range(3)]
        spin_impact.separate_wall(pc, vc, radius[i], n_wall, d_wall)
        gap = n_wall[0] * pc[0] + n_wall[1] * pc[1] + n_wall[2] * pc[2] - d_wall
        spin_impact.cushion_normal(n_wall, gap, pc[2] - ground - h_wall, nrm)
        spin_impact.ball_cushion(code, c[1], c[0], c[2], vc, wc, mass[i], radius[i], nrm, dv, dw)
        dv[2] = 0.0
        for d in range(3):
            tg.tdva[d, p] = dv[d].imag / STEP
            tg.tdvb[d, p] = 0.0
            vc[d] += dv[d]
            wc[d] += dw[d]
        _store(pc, tp[i], p)
        _store(vc, tv[i], p)
        _store(wc, tw[i], p)


@jit(borrow=True)
def accumulate(ks, nb, out_pos, meas, tg, sse, grad, gn):
    """The trajectory residuals of sample ``ks`` and their tangents
    (``tsamp``) into ``sse``, ``J^T r`` and ``J^T J`` (``gn`` may have no rows)."""
    nt = grad.shape[0]
    tsamp = tg.tsamp
    for i in range(nb):
        for d in range(3):
            m = meas[ks, i, d]
            if m != m:  # NaN: not measured
                continue
            r = out_pos[ks, i, d] - m
            sse[0] += r * r
            for p in range(nt):
                grad[p] += r * tsamp[i, d, p]
            if gn.shape[0]:
                for p in range(nt):
                    jp = tsamp[i, d, p]
                    if jp == 0.0:
                        continue
                    for q in range(p, nt):
                        gn[p, q] += jp * tsamp[i, d, q]
