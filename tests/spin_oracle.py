"""A slow, plain NumPy reference of the spinning model (``simcore.spin.spin*``).

Written apart from ``simcore`` and in another style (vectors and
``np.cross``, one ball's state as a dict), it shares no code with the
kernels; only the documented rules are the same: the motion states and
their closed forms (``simcore/spin.py``), the impacts and pooltool's
separation (``simcore/spin_impact.py``), Stronge's regimes
(``simcore/stronge.py``, here with its slip-onset roots by plain bisection
on a sampled bracket), the event order of ``simcore/spin_engine.py``.
Times of impact come from the sliding model's oracle (``tests/oracle.py``:
``np.roots`` and bisection).
"""

import numpy as np

from tests import oracle

Z = np.array([0.0, 0.0, 1.0])
SEP = 1e-6


def _unit(x):
    n = np.linalg.norm(x)
    return x / n if n > 0 else np.zeros(3)


def _slip(b):
    return b["v"] + np.cross(b["w"], -b["R"] * Z)


def _state_of(b):
    u = _slip(b)[:2]
    if np.hypot(*u) > 1e-12:
        return "sliding"
    if b["v"][0] != 0.0 or b["v"][1] != 0.0:
        return "rolling"
    return "spinning" if b["w"][2] != 0.0 else "stationary"


def _enter(b, c):
    b["s"] = _state_of(b)
    if b["s"] == "sliding":
        b["above"] = np.linalg.norm(_slip(b)) >= c["v_th"]
    elif b["s"] == "rolling":
        b["w"][:2] = np.cross(Z, b["v"])[:2] / b["R"]
    else:
        b["w"][:2] = 0.0


def _plan(b, c, g):
    """Accelerations ``a``, ``alpha`` and the segment's length and end of ball b."""
    a = np.zeros(3)
    alpha = np.zeros(3)
    rate = 2.5 * c["mu_sp"] * g / b["R"]
    alpha[2] = -np.sign(b["w"][2]) * rate
    b["a"], b["alpha"] = a, alpha
    if b["s"] == "sliding":
        u = _slip(b)
        su = np.linalg.norm(u)
        if su == 0.0:
            return 0.0, "slide"
        mu = c["mu_k"] if b["above"] else c["mu_s"]
        if mu <= 0.0:
            return np.inf, None
        uh = u / su
        a[:] = -mu * g * uh
        alpha[:2] = (-2.5 / b["R"] * mu * g * np.cross(uh, Z))[:2]
        if b["above"]:
            return (su - c["v_th"]) / (3.5 * c["mu_k"] * g), "vth"
        return su / (3.5 * mu * g), "slide"
    if b["s"] == "rolling":
        sv = np.linalg.norm(b["v"])
        if sv == 0.0:
            return 0.0, "roll"
        if c["mu_r"] <= 0.0:
            return np.inf, None
        a[:] = -c["mu_r"] * g * b["v"] / sv
        return sv / (c["mu_r"] * g), "roll"
    if b["s"] == "spinning":
        return (abs(b["w"][2]) / rate, "spin") if rate > 0 else (np.inf, None)
    return np.inf, None


def _at(b, s):
    """``(r, v, w)`` of ball b ``s`` into its segment."""
    r = b["r"] + b["v"] * s + 0.5 * b["a"] * s * s
    v = b["v"] + b["a"] * s
    wz = b["w"][2]
    wz = max(wz - abs(b["alpha"][2]) * s, 0.0) if wz > 0 else min(wz + abs(b["alpha"][2]) * s, 0.0)
    if b["s"] == "rolling":
        w = np.cross(Z, v) / b["R"]
    else:
        w = b["w"] + b["alpha"] * s
    w = w.copy()
    w[2] = wz
    v = v.copy()
    v[2] = 0.0
    r = r.copy()
    r[2] = b["r"][2]
    return r, v, w


def _toi_pair(bi, bj, h):
    d = bj["r"] - bi["r"]
    w = bj["v"] - bi["v"]
    a = bj["a"] - bi["a"]
    rr = bi["R"] + bj["R"]
    # |d + w s + a s^2 / 2|^2 - rr^2, lowest coefficient first.
    c = [d @ d - rr * rr, 2 * d @ w, w @ w + d @ a, w @ a, 0.25 * a @ a]
    return oracle.first_entry(c, h)


def _toi_wall(b, n, dw, h):
    c = [n @ b["r"] - dw - b["R"], n @ b["v"], 0.5 * n @ b["a"]]
    return oracle.first_entry(c, h)


# -- Stronge, from the regimes of its docstring --------------------------------

def _stronge(vt0, vn0, mu, e, ratio):
    beta = 3.5
    eta2 = beta / ratio**2
    r = vt0 / vn0
    shift = np.pi / 2 * (1 - 1 / e)
    phase = lambda t: t / e + shift  # noqa: E731
    tc, tf = np.pi / 2, (1 + e) * np.pi / 2
    gross = mu * ((1 + e) * beta - eta2 / e)
    close = lambda a, b: abs(a - b) <= 1e-8 + 1e-5 * abs(b)  # noqa: E731

    def bisect(f, lo, hi):
        flo = f(lo)
        if flo == 0.0:
            return lo
        if f(hi) == 0.0 or (flo > 0) == (f(hi) > 0):
            return hi if abs(f(hi)) <= abs(flo) else lo
        for _ in range(200):
            m = 0.5 * (lo + hi)
            if m in (lo, hi):
                break
            if (f(m) > 0) == (flo > 0):
                lo, flo = m, f(m)
            else:
                hi = m
        return 0.5 * (lo + hi)

    if r < mu * eta2:
        if close(r, 0.0):
            ts = tf
        elif close(r, mu * eta2):
            ts = tc
        else:
            ts = bisect(lambda t: abs(r * np.sin(ratio * t))
                        - mu * eta2 * ratio * np.sin(phase(t)), tc, tf)
        return vt0 * np.cos(ratio * ts) + mu * vn0 * beta * e * (1 + np.cos(phase(ts))), -e * vn0
    if r > gross:
        return vt0 - mu * vn0 * beta * (1 + e), -e * vn0
    if r <= mu * beta:
        tst = np.arccos(np.clip((r / mu - beta) / (eta2 - beta), -1, 1))
    else:
        tst = (np.arccos(np.clip((r / mu - beta) / (eta2 / e - e * beta), -1, 1)) - shift) * e
    ph = tst if tst <= tc else phase(tst)
    u0 = -mu * vn0 * eta2 * np.sin(ph)
    v0 = vt0 - mu * beta * vn0 * (1 - (1 if tst <= tc else e) * np.cos(ph))
    if close(r, mu * eta2):
        ts = tc
    elif close(r, gross):
        ts = tf
    else:
        k = mu * vn0
        ts = bisect(lambda t: abs((u0 * np.cos(ratio * (t - tst))
                                   - v0 / ratio * np.sin(ratio * (t - tst))) / k)
                    - eta2 * np.sin(phase(t)), tc, tf)
    vst = ratio * u0 * np.sin(ratio * (ts - tst)) + v0 * np.cos(ratio * (ts - tst))
    return vst + beta * mu * vn0 * e * (1 + np.cos(phase(ts))), -e * vn0


# -- impacts ------------------------------------------------------------------

def _kiss_pair(bi, bj, moving):
    def apart():
        d = bj["r"] - bi["r"]
        dist = np.linalg.norm(d)
        corr = (bi["R"] + bj["R"] - dist + SEP) / 2 * d / dist
        bi["r"] = bi["r"] - corr
        bj["r"] = bj["r"] + corr

    if not moving:
        return apart()
    B = bj["v"] - bi["v"]
    C = bj["r"] - bi["r"]
    qa, qb, qc = B @ B, 2 * B @ C, C @ C - (bi["R"] + bj["R"] + SEP) ** 2
    if qa == 0.0:
        return apart()
    roots = np.roots([qa, qb, qc])
    keep = [x.real for x in roots if x.real != 0 and abs(x.imag) / abs(x.real) < 1e-3]
    if not keep:
        return apart()
    s = min(keep, key=abs)
    if np.linalg.norm(s * (bi["v"] + bj["v"]) / 2) > 5 * SEP:
        return apart()
    bi["r"] = bi["r"] + s * bi["v"]
    bj["r"] = bj["r"] + s * bj["v"]


def _pair_impact(bi, bj, c, law):
    n = _unit(bj["r"] - bi["r"])
    un = (bj["v"] - bi["v"]) @ n
    if un >= 0:
        return n, 0.0, 0.0
    W = 1 / bi["m"] + 1 / bj["m"]
    jn = -(1 + c["e_bb"]) * un / W
    uc = (bj["v"] + np.cross(bj["w"], -bj["R"] * n)) - (bi["v"] + np.cross(bi["w"], bi["R"] * n))
    ut = uc - (uc @ n) * n
    sut = np.linalg.norm(ut)
    if law == "frictional_inelastic":
        mu = c["mu_bb"] + c.get("mu_bb_b", 0.0) * np.exp(-c.get("mu_bb_c", 0.0) * sut)
        bound = 2 * mu * c["e_bb"] * -un / W
    else:
        bound = c["mu_bb"] * jn
    jt = min(sut / (3.5 * W), bound)
    P = jn * n - jt * _unit(ut)
    for b, sign, cpt in ((bj, 1, -bj["R"] * n), (bi, -1, bi["R"] * n)):
        dv = sign * P / b["m"]
        dv[2] = 0.0
        b["v"] = b["v"] + dv
        b["w"] = b["w"] + np.cross(cpt, sign * P) / (0.4 * b["m"] * b["R"] ** 2)
    return n, jn, jt


def _wall_impact(b, c, law, n_wall, d_wall, height, ground):
    gap = n_wall @ b["r"] - d_wall
    vn_out = -(n_wall @ b["v"])
    s = (gap - b["R"] - SEP) / vn_out if vn_out != 0 else np.inf
    if np.isfinite(s) and abs(s) * np.linalg.norm(b["v"]) <= 5 * SEP:
        b["r"] = b["r"] + s * b["v"]
    else:
        b["r"] = b["r"] + (b["R"] + SEP - gap) * n_wall
    gap = n_wall @ b["r"] - d_wall
    n = n_wall if np.isnan(height) else _unit(gap * n_wall + (b["r"][2] - ground - height) * Z)
    vc = b["v"] + np.cross(b["w"], -b["R"] * n)
    vn = vc @ n
    if vn >= 0:
        return n, 0.0, 0.0
    ut = vc - vn * n
    sut = np.linalg.norm(ut)
    t = _unit(ut)
    m = b["m"]
    if law == "stronge_compliant":
        vtf, vnf = _stronge(-sut, vn, c["mu_w"], c["e_bw"], c["omega_ratio_w"])
        jn, jt = m * (vnf - vn), m * (vtf + sut) / 3.5
    else:
        jn = -(1 + c["e_bw"]) * vn * m
        jt = min(m * sut / 3.5, c["mu_w"] * jn)
    P = jn * n - jt * t
    dv = P / m
    dv[2] = 0.0
    b["v"] = b["v"] + dv
    b["w"] = b["w"] + np.cross(-b["R"] * n, P) / (0.4 * m * b["R"] ** 2)
    return n, jn, jt


# -- the loop -----------------------------------------------------------------

def simulate(radius, mass, pos, vel, omega, walls, heights, coef, t_end, laws=None, g=9.81,
             ground=0.0, samples=()):
    """One scenario: returns ``(r, v, w, events, samples)``; events are
    ``(t, kind, a, b)`` with the engine's labels, samples ``(r, v, w)`` at the
    given times."""
    laws = laws or {}
    balls = [{"R": float(radius[i]), "m": float(mass[i]), "r": np.array(pos[i], float),
              "v": np.array(vel[i], float), "w": np.array(omega[i], float), "above": False}
             for i in range(len(radius))]
    for b in balls:
        _enter(b, coef)
    t = 0.0
    events, out = [], []
    samples = list(samples)
    while samples and samples[0] <= t:
        out.append([(b["r"].copy(), b["v"].copy(), b["w"].copy()) for b in balls])
        samples.pop(0)
    for _ in range(100_000):
        if t >= t_end:
            break
        plans = [_plan(b, coef, g) for b in balls]
        best, what = t_end - t, None
        for i, (dur, end) in enumerate(plans):
            if dur < best:
                best, what = dur, ("transition", i, end)
        moving = [b["s"] in ("sliding", "rolling") for b in balls]
        for i in range(len(balls)):
            for j in range(i + 1, len(balls)):
                if moving[i] or moving[j]:
                    s = _toi_pair(balls[i], balls[j], best)
                    if s < best:
                        best, what = s, ("pair", i, j)
            if moving[i]:
                for k, wl in enumerate(walls):
                    s = _toi_wall(balls[i], np.array(wl[:3], float), wl[3], best)
                    if s < best:
                        best, what = s, ("wall", i, k)
        t_new = t_end if what is None else t + best
        while samples and samples[0] <= t_new:
            out.append([tuple(x.copy() for x in _at(b, samples[0] - t)) for b in balls])
            samples.pop(0)
        for b in balls:
            b["r"], b["v"], b["w"] = _at(b, t_new - t)
        t = t_new
        if what is None:
            continue
        kind, i, j = what
        if kind == "transition":
            b = balls[i]
            if j == "vth":
                b["above"] = False
            elif j == "slide":
                b["s"] = "rolling"
                b["w"][:2] = np.cross(Z, b["v"])[:2] / b["R"]
                events.append((t, "slide_roll", i, -1))
            else:
                b["v"][:2] = 0.0
                b["w"][:2] = 0.0
                if j == "roll" and b["w"][2] != 0.0:
                    b["s"] = "spinning"
                    events.append((t, "roll_spin", i, -1))
                else:
                    b["w"][2] = 0.0
                    b["s"] = "stationary"
                    events.append((t, "roll_rest" if j == "roll" else "spin_rest", i, -1))
        elif kind == "pair":
            _kiss_pair(balls[i], balls[j], moving[i] or moving[j])
            _pair_impact(balls[i], balls[j], coef, laws.get("body_body", "impulse"))
            _enter(balls[i], coef)
            _enter(balls[j], coef)
            events.append((t, "body-body", i, j))
        else:
            wl = walls[j]
            _wall_impact(balls[i], coef, laws.get("body_wall", "impulse"),
                         np.array(wl[:3], float), wl[3], heights[j], ground)
            _enter(balls[i], coef)
            events.append((t, "body-wall", i, j))
    while samples:
        out.append([(b["r"].copy(), b["v"].copy(), b["w"].copy()) for b in balls])
        samples.pop(0)
    return (np.array([b["r"] for b in balls]), np.array([b["v"] for b in balls]),
            np.array([b["w"] for b in balls]), events, out)
