"""Forward-mode sensitivities of the event loop (tangents), stage by stage.

The engine carries, beside the state, its derivative with respect to ``NT``
directions ``p`` (coefficients, initial velocities, control forces):
``tpos``, ``tvel``, ``tacc (nb, 3, NT)``.  The tangents are *event-indexed*:
they are derivatives of the state right after the last event, at time
``tau``, whose own derivative is ``ttau (NT,)``.  Between events the motion
is the closed-form parabola ``p(s) = P + V s + A s^2 / 2`` with ``A = a(X, theta)``
evaluated once at the segment start, so (differentiating at fixed ``s``)::

    dp(s) = dP + dV s + dA s^2 / 2,        dv(s) = dV + dA s.

Event times by the implicit function theorem.  A segment ends at the root
``s*`` of an event function ``g(x(s), theta) = 0`` (impact gap, stop, speed
crossing ``v_th``) or at a fixed absolute time (window edge, ``dt`` grid,
end of run).  Then::

    ds* = -(dg/dx . dx(s*) + dg/dtheta) / (dg/ds)       (root event)
    ds* = -dtau                                          (fixed time)

and the state just before the event, as a function of theta, has the tangent
``dx(s*) + xdot(s*) ds*``; ``tau`` moves by ``ds*``.  Samples are taken at fixed
times ``t_q = tau + s_q``, so their tangent is ``dx(s_q) - xdot(s_q) dtau``.
An impulse ``x+ = J(x-, theta)`` maps the tangent by the chain rule through
:mod:`simcore.laws.impulse`'s formulas (functions below).

The stick branch of Coulomb friction (the impulse that zeroes the tangential
velocity) and static friction have exactly zero sensitivity to ``mu``: that
is the truth of the model, not an approximation; the engine counts, per
direction, the events and segments in which a coefficient entered
(``signal``), so an optimiser can tell "zero gradient" from "no data".

Covered exactly: free flight, the ground-only contact path (slide, static
hold, start from rest, the implicit direction of a rotating push), impacts
with planes and between bodies (slip and stick; also where an impulse
propagates through a resting contact), stops and ``v_th`` crossings.
Not covered (the scenario is flagged ``nondiff`` and its tangents are not to
be trusted): sustained contact with walls or between bodies (the general
complementarity solve), body-body stick events, and the symplectic integrator.
"""

import numpy as np

from ..kernel.config import jit
from ..laws import registry as laws


@jit
def project_plane(i, n, tv):
    """Remove the component along ``n`` of body i's tangent ``tv[i]`` (contact kept)."""
    for p in range(tv.shape[2]):
        vn = n[0] * tv[i, 0, p] + n[1] * tv[i, 1, p] + n[2] * tv[i, 2, p]
        for d in range(3):
            tv[i, d, p] -= vn * n[d]


@jit
def free_acc(nb, t, lag, inv_m, c_body, c_t0, c_t1, t_ctrl, tfa):
    """Tangent of the free acceleration: direction p with ``t_ctrl[p] = 3 q + d``
    moves control q's force component d, so ``a_free`` of its body by ``1/m``
    while the window ``[c_t0 + lag, c_t1 + lag)`` is active."""
    tfa[:nb] = 0.0
    for p in range(t_ctrl.shape[0]):
        c = t_ctrl[p]
        if c < 0 or c // 3 >= c_body.shape[0]:
            continue
        q = c // 3
        if c_t0[q] + lag <= t < c_t1[q] + lag:
            tfa[c_body[q], c % 3, p] += inv_m[c_body[q]]


@jit
def ground_slide(i, v, fa, mu, starting, h_dir, tvel, tfa, ttau, p_mu,
                 tacc, signal):
    """Tangent of kinetic friction on the ground (``contact._solve_ground_only``).

    ``a_h = a_free,h + a_free,z mu w / |w|`` with ``w = v_h + h a_free,h``
    (``h = h_dir``, the implicit direction over a ``dt`` step; ``h = 0``
    otherwise) or, from rest, the start direction ``a_free,h / |a_free,h|``
    (against the static force ``s = -m a_free,h``).
    ``h`` ends at a fixed grid time, so ``dh = -dtau``.  ``p_mu`` is the
    direction of the coefficient in use (``-1`` if it is fixed).
    """
    nt = tacc.shape[2]
    w0 = v[0] + h_dir * fa[0]
    w1 = v[1] + h_dir * fa[1]
    size = np.sqrt(w0 * w0 + w1 * w1)
    from_start = size == 0.0 and starting
    if from_start:
        w0 = fa[0]
        w1 = fa[1]
        size = np.sqrt(w0 * w0 + w1 * w1)
    if size == 0.0:
        for p in range(nt):
            tacc[i, 0, p] = tfa[i, 0, p]
            tacc[i, 1, p] = tfa[i, 1, p]
            tacc[i, 2, p] = 0.0
        return
    u0 = w0 / size
    u1 = w1 / size
    g_n = -fa[2]  # normal force per unit mass
    for p in range(nt):
        if from_start:
            dw0 = tfa[i, 0, p]
            dw1 = tfa[i, 1, p]
        else:
            dh = -ttau[p] if h_dir > 0.0 else 0.0
            dw0 = tvel[i, 0, p] + h_dir * tfa[i, 0, p] + dh * fa[0]
            dw1 = tvel[i, 1, p] + h_dir * tfa[i, 1, p] + dh * fa[1]
        # Tangent of the unit direction: (I - u u^T) dw / |w|.
        along = u0 * dw0 + u1 * dw1
        du0 = (dw0 - along * u0) / size
        du1 = (dw1 - along * u1) / size
        dg_n = -tfa[i, 2, p]
        dmu = 1.0 if p == p_mu else 0.0
        tacc[i, 0, p] = tfa[i, 0, p] - dg_n * mu * u0 - g_n * (dmu * u0 + mu * du0)
        tacc[i, 1, p] = tfa[i, 1, p] - dg_n * mu * u1 - g_n * (dmu * u1 + mu * du1)
        tacc[i, 2, p] = 0.0
    if p_mu >= 0:
        signal[p_mu] += 1


@jit
def fixed_time(ttau, ds):
    """A segment that ends at a fixed absolute time: ``ds = -dtau``."""
    for p in range(ttau.shape[0]):
        ds[p] = -ttau[p]


@jit
def impact_plane_time(i, n, s, vel, acc, tpos, tvel, tacc, p_d, ds):
    """``g = n . p_i(s) - d - r``: ``ds = -(n . dp(s) - dd) / n . v(s)``, where
    direction ``p_d`` (``-1``: none) moves the plane's offset, ``dd = 1``.
    False if grazing."""
    den = 0.0
    for d in range(3):
        den += n[d] * (vel[i, d] + acc[i, d] * s)
    if den == 0.0:
        return False
    hs2 = 0.5 * s * s
    for p in range(ds.shape[0]):
        num = 0.0
        for d in range(3):
            num += n[d] * (tpos[i, d, p] + tvel[i, d, p] * s + tacc[i, d, p] * hs2)
        if p == p_d:
            num -= 1.0
        ds[p] = -num / den
    return True


@jit
def impact_body_time(i, j, s, pos, vel, acc, tpos, tvel, tacc, ds):
    """``g = |p_j(s) - p_i(s)| - r_i - r_j``: ``ds = -n . d(p_j - p_i) / n . (v_j - v_i)``."""
    hs2 = 0.5 * s * s
    n = np.empty(3)
    size = 0.0
    for d in range(3):
        n[d] = (pos[j, d] + vel[j, d] * s + acc[j, d] * hs2) - (
            pos[i, d] + vel[i, d] * s + acc[i, d] * hs2)
        size += n[d] * n[d]
    size = np.sqrt(size)
    den = 0.0
    for d in range(3):
        n[d] /= size
        den += n[d] * ((vel[j, d] + acc[j, d] * s) - (vel[i, d] + acc[i, d] * s))
    if den == 0.0:
        return False
    for p in range(ds.shape[0]):
        num = 0.0
        for d in range(3):
            num += n[d] * ((tpos[j, d, p] + tvel[j, d, p] * s + tacc[j, d, p] * hs2)
                           - (tpos[i, d, p] + tvel[i, d, p] * s + tacc[i, d, p] * hs2))
        ds[p] = -num / den
    return True


@jit
def stop_time(i, vel, acc, tvel, tacc, ds):
    """``s = -(V . V) / (A . V)`` (``integrate.stop_time``), differentiated directly."""
    vv = 0.0
    av = 0.0
    for d in range(3):
        vv += vel[i, d] * vel[i, d]
        av += acc[i, d] * vel[i, d]
    for p in range(ds.shape[0]):
        dvv = 0.0
        dav = 0.0
        for d in range(3):
            dvv += 2.0 * vel[i, d] * tvel[i, d, p]
            dav += tacc[i, d, p] * vel[i, d] + acc[i, d] * tvel[i, d, p]
        ds[p] = -(dvv * av - vv * dav) / (av * av)


@jit
def vth_time(i, s, vel, acc, tvel, tacc, v_th, p_vth, ds, signal):
    """``g = |v(s)|^2 - v_th^2``: ``ds = -(v(s) . dv(s) - v_th dv_th) / (v(s) . A)``."""
    den = 0.0
    for d in range(3):
        den += (vel[i, d] + acc[i, d] * s) * acc[i, d]
    for p in range(ds.shape[0]):
        num = 0.0
        for d in range(3):
            num += (vel[i, d] + acc[i, d] * s) * (tvel[i, d, p] + tacc[i, d, p] * s)
        if p == p_vth:
            num -= v_th
        ds[p] = -num / den
    if p_vth >= 0:
        signal[p_vth] += 1


@jit
def sample(nb, vel, acc, s, tpos, tvel, tacc, ttau, out):
    """Tangent of the positions at the fixed time ``tau + s`` into ``out (nb, 3, NT)``."""
    hs2 = 0.5 * s * s
    for i in range(nb):
        for d in range(3):
            v_s = vel[i, d] + acc[i, d] * s
            for p in range(ttau.shape[0]):
                out[i, d, p] = (tpos[i, d, p] + tvel[i, d, p] * s + tacc[i, d, p] * hs2
                                - v_s * ttau[p])


@jit
def drift(nb, vel, acc, s, ds, tpos, tvel, tacc, ttau):
    """Advance the tangents to the event ``s`` later, whose time moves by ``ds``.

    Call after ``integrate.drift`` (``vel`` is the velocity at the event).
    """
    hs2 = 0.5 * s * s
    nt = ttau.shape[0]
    for i in range(nb):
        for d in range(3):
            for p in range(nt):
                tpos[i, d, p] += tvel[i, d, p] * s + tacc[i, d, p] * hs2 + vel[i, d] * ds[p]
                tvel[i, d, p] += tacc[i, d, p] * s + acc[i, d] * ds[p]
    for p in range(nt):
        ttau[p] += ds[p]


@jit
def impact_plane(i, v, n, e, mu, imp, sustained, pdirs, tvel, tdv, signal):
    """Tangent of a plane impact (``impulse.plane_impact``, ``apply_plane``)
    for body i with pre-impact velocity ``v``, from the forward's
    :class:`simcore.laws.impulse.Impact` ``imp``.

    ``J_n = -(1 + e) v_n``; slip: ``v+ = v + J_n n - mu J_n t``; stick:
    ``v+ = -e v_n n`` (no ``mu``).  Writes ``tvel[i]`` (after) and ``tdv`` (the
    tangent of the velocity change).  ``sustained``: ``e`` was forced to 0;
    ``pdirs``: the directions of ``(e, mu)`` (-1: none).
    """
    p_e, p_mu = pdirs
    nt = tdv.shape[1]
    vn, jn, jt, vt, slipped = imp.vn, imp.jn, imp.jt, imp.vt, imp.slipped
    t0, t1, t2 = imp.t0, imp.t1, imp.t2
    for p in range(nt):
        dvn = n[0] * tvel[i, 0, p] + n[1] * tvel[i, 1, p] + n[2] * tvel[i, 2, p]
        de = 1.0 if (p == p_e and not sustained) else 0.0
        djn = 0.0
        if jn > 0.0:
            djn = -(1.0 + e) * dvn - de * vn
        if slipped:
            # d(v_t) and the tangent of the unit direction t.
            dt0 = tvel[i, 0, p] - dvn * n[0]
            dt1 = tvel[i, 1, p] - dvn * n[1]
            dt2 = tvel[i, 2, p] - dvn * n[2]
            du0 = 0.0
            du1 = 0.0
            du2 = 0.0
            if vt > 0.0:
                along = t0 * dt0 + t1 * dt1 + t2 * dt2
                du0 = (dt0 - along * t0) / vt
                du1 = (dt1 - along * t1) / vt
                du2 = (dt2 - along * t2) / vt
            dmu = 1.0 if p == p_mu else 0.0
            djt = dmu * jn + mu * djn
            tdv[0, p] = djn * n[0] - djt * t0 - jt * du0
            tdv[1, p] = djn * n[1] - djt * t1 - jt * du1
            tdv[2, p] = djn * n[2] - djt * t2 - jt * du2
        else:
            # Stick: v+ = (v_n + J_n) n.
            for d in range(3):
                tdv[d, p] = (dvn + djn) * n[d] - tvel[i, d, p]
        for d in range(3):
            tvel[i, d, p] += tdv[d, p]
    if p_e >= 0 and not sustained and jn > 0.0:
        signal[p_e] += 1
    if p_mu >= 0 and slipped and jn > 0.0:
        signal[p_mu] += 1
    if sustained:
        project_plane(i, n, tvel)


@jit
def impact_body(pair, v, pos, n, imp, inv_m, law, sustained, pdirs, tt_arrays, signal):
    """Tangent of a body-body impact (``laws.pair_impact``, ``impulse.apply_pair``)
    from the forward's :class:`simcore.laws.impulse.Impact` ``imp`` and normal ``n``.

    ``n = (p_j - p_i) / |p_j - p_i|`` with ``dn = (I - n n^T) d(p_j - p_i) / |.|``;
    ``u = v_j - v_i``; ``J_n = -(1 + e) u . n / W`` (``W = 1/m_i + 1/m_j``);
    ``u_t = u - (u . n) n``; the friction impulse ``J_t`` is the law's slip
    bound (``laws.slip_bound``, its tangent ``laws.slip_bound_tangent``) or
    ``|u_t| / W`` (stick) along ``t = u_t / |u_t|``; impulse on j ``J_n n - J_t t``.
    ``pair`` is ``(i, j)``, ``v`` their velocities ``(v_i, v_j)`` before the
    impact, ``inv_m`` ``(1/m_i, 1/m_j)``; ``law`` the
    :class:`simcore.laws.registry.PairLaw` (its ``e`` already 0 when
    ``sustained``); ``pdirs`` the directions of ``(e, mu,
    mu_b, mu_c)`` (-1: none); ``tt_arrays`` the tangents ``(tpos, tvel (nb,
    3, NT), tdvi, tdvj (3, NT))``.
    """
    i, j = pair
    vi, vj = v
    tpos, tvel, tdvi, tdvj = tt_arrays
    p_e, p_mu, p_mub, p_muc = pdirs
    inv_mi, inv_mj = inv_m
    e = law.e
    nt = tdvi.shape[1]
    w = inv_mi + inv_mj
    un, jn, jt, q, slipped = imp.vn, imp.jn, imp.jt, imp.vt, imp.slipped
    tt = (imp.t0, imp.t1, imp.t2)
    u = np.empty(3)
    dn = np.empty(3)
    du = np.empty(3)
    dut = np.empty(3)
    dist = 0.0
    for d in range(3):
        u[d] = vj[d] - vi[d]
        dist += (pos[j, d] - pos[i, d]) ** 2
    dist = np.sqrt(dist)
    for p in range(nt):
        dnn = 0.0
        for d in range(3):
            dn[d] = (tpos[j, d, p] - tpos[i, d, p]) / dist
            dnn += dn[d] * n[d]
        dun = 0.0
        for d in range(3):
            dn[d] -= dnn * n[d]
            du[d] = tvel[j, d, p] - tvel[i, d, p]
            dun += du[d] * n[d] + u[d] * dn[d]
        de = 1.0 if (p == p_e and not sustained) else 0.0
        djn = (-(1.0 + e) * dun - de * un) / w if jn > 0.0 else 0.0
        along = 0.0
        for d in range(3):
            dut[d] = du[d] - dun * n[d] - un * dn[d]
            along += tt[d] * dut[d]
        if slipped:
            dcoef = (de, 1.0 if p == p_mu else 0.0, 1.0 if p == p_mub else 0.0,
                     1.0 if p == p_muc else 0.0)
            djt = laws.slip_bound_tangent(law, un, jn, q, w, dcoef, dun, djn, along)
        else:
            djt = along / w
        for d in range(3):
            dtd = (dut[d] - along * tt[d]) / q if q > 0.0 else 0.0
            dimp = djn * n[d] + jn * dn[d] - djt * tt[d] - jt * dtd
            tdvj[d, p] = dimp * inv_mj
            tdvi[d, p] = -dimp * inv_mi
            tvel[j, d, p] += tdvj[d, p]
            tvel[i, d, p] += tdvi[d, p]
    if p_e >= 0 and not sustained and jn > 0.0:
        signal[p_e] += 1
    if slipped and jn > 0.0:
        for p_c in (p_mu, p_mub, p_muc):
            if p_c >= 0:
                signal[p_c] += 1


@jit
def accumulate_segment(vel, acc, t0, samp_t, k0, k1, ts, out_pos, meas, sums):
    """:func:`accumulate` for the samples ``k0:k1`` of one segment between
    events, by moments: the segment's tangents ``ts`` (``tpos``, ``tvel``,
    ``tacc``, ``ttau``) into the residual sums ``sums`` (``sse``, ``grad``,
    ``gn``).

    Inside a segment the tangent of a sample ``s = t_k - t0`` after its start
    is the polynomial ``J(s) = A + B s + C s^2`` (:func:`sample`: ``A = tpos -
    v ttau``, ``B = tvel - a ttau``, ``C = tacc / 2``), so ``sum_k J r_k =
    A R0 + B R1 + C R2`` with ``R_n = sum_k s^n r_k`` and ``sum_k J J^T`` is a
    combination of ``S_n = sum_k s^n`` (n <= 4).  The cost per sample is a
    dozen operations instead of ``3 (NT + NT (NT + 1) / 2)``; the moments are
    sums in ``s`` itself, so there is no cancellation.
    """
    tpos, tvel, tacc, ttau = ts.tpos, ts.tvel, ts.tacc, ts.ttau
    sse, grad, gn = sums.sse, sums.grad, sums.gn
    nt = grad.shape[0]
    full = gn.shape[0] == nt
    for i in range(vel.shape[0]):
        for d in range(3):
            s0 = s1 = s2 = s3 = s4 = 0.0
            r0 = r1 = r2 = 0.0
            for k in range(k0, k1):
                m = meas[k, i, d]
                if m != m:
                    continue
                r = out_pos[k, i, d] - m
                sse[0] += r * r
                s = samp_t[k] - t0
                ss = s * s
                s0 += 1.0
                s1 += s
                s2 += ss
                s3 += ss * s
                s4 += ss * ss
                r0 += r
                r1 += r * s
                r2 += r * ss
            if nt == 0 or s0 == 0.0:
                continue
            v = vel[i, d]
            a = acc[i, d]
            for p in range(nt):
                ap = tpos[i, d, p] - v * ttau[p]
                bp = tvel[i, d, p] - a * ttau[p]
                cp = 0.5 * tacc[i, d, p]
                grad[p] += ap * r0 + bp * r1 + cp * r2
                if full:
                    for q in range(p, nt):
                        aq = tpos[i, d, q] - v * ttau[q]
                        bq = tvel[i, d, q] - a * ttau[q]
                        cq = 0.5 * tacc[i, d, q]
                        gn[p, q] += (ap * aq * s0 + (ap * bq + bp * aq) * s1
                                     + (ap * cq + cp * aq + bp * bq) * s2
                                     + (bp * cq + cp * bq) * s3 + cp * cq * s4)


