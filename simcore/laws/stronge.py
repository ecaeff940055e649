"""Stronge's compliant frictional impact of a spinning sphere on a cushion
(``laws: {body_wall: stronge_compliant}``, spin model only).

After Stronge, *Impact Mechanics* (2nd ed., 2018), ch. 5 (compliant
frictional impact, the collinear case), as pooltool 0.6 implements it for
the cushion (``physics/resolve/stronge_compliant.py``,
``ball_cushion/stronge_compliant/model.py``).

The contact is a normal spring and a tangential spring; the sphere against
a fixed half-space has the mass-matrix coefficients ``beta_n = 1`` and
``beta_t = 1 + m R^2 / I = 7/2``; the ratio of the springs' frequencies
``omega_t / omega_n`` is the coefficient ``omega_ratio_w`` (in (1, 2)), and
``eta^2 = beta_t / (beta_n omega_ratio_w^2)``.  With the contact point's
velocity split into the normal part ``v_n0 < 0`` (approaching) and the
tangential one ``v_t0 <= 0`` (signed along ``t``, the direction opposite
the slip), the normal motion is a half sine in compression (duration
``t_c = pi / (2 omega_n)``) and, with restitution ``e`` (``e_bw``), a
stretched one in restitution (``e t_c``); the tangential spring sticks or
slips under Coulomb friction ``mu`` (``mu_w``).  Three regimes, by the ratio
``r = v_t0 / v_n0``:

* stick-slip, ``r < mu eta^2``: sticks, then slips from ``t_slip`` (the root
  in ``[t_c, t_f]`` where the spring force reaches the friction limit);
* gross slip, ``r > mu ((1 + e) beta_t / beta_n - eta^2 / e)``: slips
  throughout, ``v_tf = v_t0 - mu v_n0 (beta_t / beta_n) (1 + e)``;
* slip-stick-slip otherwise: slips until ``t_stick`` (closed form), sticks,
  slips again from ``t_slip`` (a root in ``[t_c, t_f]``).

In every regime ``v_nf = -e v_n0``.  Only frequency ratios enter, so time is
measured here in units of ``1 / omega_n`` (pooltool sets an arbitrary
``k_n = 1e3``; the outcome does not depend on it).

Reconstructions.  pooltool tests gross slip first.  The two conditions
overlap when ``e < eta^2 / beta_t = 1 / omega_ratio_w^2`` (a soft, very
compliant cushion), and there the contact sticks first, as the compliant
contact integrated in time shows (``tests/test_spin.py``): stick-slip is
tested first here.  Elsewhere (pooltool's own ``e = 0.85``, ratio 1.8) the
regimes are disjoint and the order does not matter.  The slip-onset roots are found by bisection to full
precision (pooltool: scipy's ``toms748`` at its default tolerances, which
agree to about 1e-10 of the contact time).  pooltool's special cases are
kept: a ratio ``r`` within ``numpy.isclose`` of 0, ``mu eta^2`` or the gross
slip boundary takes ``t_f``, ``t_c``, ``t_f`` for ``t_slip`` without a root.
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.parameter import Parameter

NAME = "stronge_compliant"

#: Mass-matrix coefficients of a solid sphere against a fixed half-space.
BETA_N = 1.0
BETA_T = 3.5

#: The regime of an impact, as :func:`collinear` returns it.
GROSS_SLIP = 0
STICK_SLIP = 1
SLIP_STICK_SLIP = 2

#: The coefficients only this law reads (besides ``mu_w`` and ``e_bw``).
PARAMETERS = (
    Parameter("omega_ratio_w", 1.8, (1.01, 1.99), "1",
              "ratio of the tangential to the normal compliance frequency of a cushion "
              "(Stronge's compliant impact)",
              "wall impact that stuck", "wall", -1, law=NAME),
)

_HALF_PI = 0.5 * np.pi


@jit
def _isclose(a, b):
    """``numpy.isclose(a, b)`` at its default tolerances (of the real parts)."""
    return abs(a.real - b.real) <= 1e-8 + 1e-5 * abs(b.real)


@jit
def _abs(x):
    """``|x|`` of a real number, continued analytically for a complex step
    (the sign of the real part decides)."""
    return x if x.real >= 0.0 else -x


@jit
def _clip(x):
    """``x`` clipped to ``[-1, 1]`` (by its real part)."""
    if x.real > 1.0:
        return 1.0 + 0.0 * x
    if x.real < -1.0:
        return -1.0 + 0.0 * x
    return x


@jit
def _shift(e):
    """The phase shift of the restitution phase, ``pi/2 (1 - 1/e)``."""
    return _HALF_PI * (1.0 - 1.0 / e)


@jit
def _phase(t, e):
    """The normal spring's phase at (nondimensional) time ``t``: ``t`` in
    compression, ``t / e + pi/2 (1 - 1/e)`` in restitution."""
    return t / e + _shift(e)


@jit
def _onset(kind, t, r, mu, eta2, ratio, e, u_st, v_st, t_st):
    """The slip-onset function whose root :func:`_root` finds (pooltool's
    ``slip_time_for_initial_stick`` (kind 0) and ``slip_time_for_stick``
    (kind 1), in units of ``1 / omega_n``); ``u_st``, ``v_st`` the tangential
    displacement and velocity at the stick time ``t_st``, over ``mu v_n0``."""
    if kind == 0:
        return _abs(-r * np.sin(ratio * t)) - mu * eta2 * ratio * np.sin(_phase(t, e))
    dt = t - t_st
    return (_abs(u_st * np.cos(ratio * dt) - v_st / ratio * np.sin(ratio * dt))
            - eta2 * np.sin(_phase(t, e)))


@jit
def _onset_rate(kind, t, r, mu, eta2, ratio, e, u_st, v_st, t_st):
    """``d/dt`` of :func:`_onset`."""
    if kind == 0:
        inner = -r * np.sin(ratio * t)
        rate = -r * ratio * np.cos(ratio * t)
        return ((rate if inner.real >= 0.0 else -rate)
                - mu * eta2 * ratio * np.cos(_phase(t, e)) / e)
    dt = t - t_st
    inner = u_st * np.cos(ratio * dt) - v_st / ratio * np.sin(ratio * dt)
    rate = -u_st * ratio * np.sin(ratio * dt) - v_st * np.cos(ratio * dt)
    return (rate if inner.real >= 0.0 else -rate) - eta2 * np.cos(_phase(t, e)) / e


@jit
def _root(kind, a, b, r, mu, eta2, ratio, e, u_st, v_st, t_st):
    """The root of :func:`_onset` on ``[a, b]`` by bisection to the last bit
    (the regime's conditions give a sign change there; without one, the end
    nearer zero), then one Newton step.  At most a few impacts per shot need
    it: bisection's certainty is worth its 60-odd evaluations.  The Newton
    step moves a root found to the last bit by rounding only; with complex
    coefficients (a complex step, :mod:`simcore.spin.spin_tangent`) it carries
    the root's derivative, ``-(df/dtheta) / (df/dt)``, the implicit
    function theorem."""
    a = a.real
    b = b.real
    fa = _onset(kind, a, r, mu, eta2, ratio, e, u_st, v_st, t_st).real
    fb = _onset(kind, b, r, mu, eta2, ratio, e, u_st, v_st, t_st).real
    if fa == 0.0:
        m = a
    elif fb == 0.0:
        m = b
    elif (fa > 0.0) == (fb > 0.0):
        return (a if abs(fa) < abs(fb) else b) + 0.0 * r
    else:
        for _ in range(200):
            m = 0.5 * (a + b)
            if m <= a or m >= b:
                break
            fm = _onset(kind, m, r, mu, eta2, ratio, e, u_st, v_st, t_st).real
            if fm == 0.0:
                break
            if (fm > 0.0) == (fa > 0.0):
                a, fa = m, fm
            else:
                b = m
        m = 0.5 * (a + b) if m <= a or m >= b else m
    slope = _onset_rate(kind, m, r, mu, eta2, ratio, e, u_st, v_st, t_st)
    f = _onset(kind, m, r, mu, eta2, ratio, e, u_st, v_st, t_st)
    if slope.real == 0.0:
        return m + 0.0 * f
    return m - (f - f.real) / slope


@jit
def collinear(v_t0, v_n0, mu, e, ratio):
    """Stronge's compliant frictional impact of a sphere on a half-space
    (module docstring): the contact point's final tangential and normal
    velocities ``(v_tf, v_nf)`` and the regime, from ``v_t0 <= 0``,
    ``v_n0 < 0``, friction ``mu``, restitution ``e > 0`` and frequency ratio
    ``ratio = omega_t / omega_n``.  Real, or complex for a complex step
    (the real parts choose the regime)."""
    beta = BETA_T / BETA_N
    eta2 = beta / (ratio * ratio)
    r = v_t0 / v_n0
    t_c = _HALF_PI
    t_f = (1.0 + e) * t_c
    v_nf = -e * v_n0
    gross = mu * ((1.0 + e) * beta - eta2 / e)
    if r.real < (mu * eta2).real:
        # Stick from the start; slip again once the spring force reaches mu N.
        if _isclose(r, 0.0):
            t_slip = t_f + 0.0 * r
        elif _isclose(r, mu * eta2):
            t_slip = t_c + 0.0 * r
        else:
            t_slip = _root(0, t_c, t_f, r, mu, eta2, ratio, e, 0.0, 0.0, 0.0)
        v_stick = v_t0 * np.cos(ratio * t_slip)
        return (v_stick + mu * v_n0 * beta * e * (1.0 + np.cos(_phase(t_slip, e))), v_nf,
                STICK_SLIP)
    if r.real > gross.real:
        return v_t0 - mu * v_n0 * beta * (1.0 + e), v_nf, GROSS_SLIP
    # Slip, stick at t_stick (closed form), slip again from t_slip.
    if r.real <= (mu * beta).real:
        x = (r / mu - beta) / (eta2 - beta)
        t_stick = np.arccos(_clip(x))
    else:
        x = (r / mu - beta) / (eta2 / e - e * beta)
        t_stick = (np.arccos(_clip(x)) - _shift(e)) * e
    if t_stick.real <= t_c:
        u_st = -mu * v_n0 * eta2 * np.sin(t_stick)
        v_st = v_t0 - mu * beta * v_n0 * (1.0 - np.cos(t_stick))
    else:
        u_st = -mu * v_n0 * eta2 * np.sin(_phase(t_stick, e))
        v_st = v_t0 - mu * beta * v_n0 * (1.0 - e * np.cos(_phase(t_stick, e)))
    if _isclose(r, mu * eta2):
        t_slip = t_c + 0.0 * r
    elif _isclose(r, gross):
        t_slip = t_f + 0.0 * r
    else:
        scale = mu * v_n0
        t_slip = _root(1, t_c, t_f, r, mu, eta2, ratio, e, u_st / scale, v_st / scale, t_stick)
    dt = t_slip - t_stick
    v_stick = ratio * u_st * np.sin(ratio * dt) + v_st * np.cos(ratio * dt)
    return (v_stick + beta * mu * v_n0 * e * (1.0 + np.cos(_phase(t_slip, e))), v_nf,
            SLIP_STICK_SLIP)
