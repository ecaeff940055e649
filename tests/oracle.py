"""A slow, plain NumPy reference of the engine's exact integrator.

Written apart from ``simcore`` and in another style, it shares no code with
the kernels; only the documented rules (``simcore/*.py`` docstrings) are the
same:

* times of impact by bracketing: critical points of the gap polynomial from
  ``np.roots`` of its derivative, then plain bisection to the last bit;
* contact forces from the dense system ``H M^-1 W z = -H a_free`` (its
  minimum-norm solution when contacts are redundant), with the same
  active-set rules (clamp the most negative normal force, release the last
  clamped contact when the rows become inconsistent, then start resting
  bodies whose static force leaves the cone);
* impulses, the Zeno guard, event order and tie-breaking as the engine's.

It covers the exact integrator only; the symplectic option is tested against
its convergence order instead.
"""

import numpy as np

from simcore import params as P

GAP_TOL = 1e-12
V_CONTACT = 1e-5
V_STOP = 1e-12
V_ROUND = 1e-12
N_TOL = 1e-9
DIR_TOL = 1e-12

KINDS = ("body-body", "body-wall", "body-ground", "stop", "start")


def _poly(c, s):
    """Value of ``sum c[k] s^k``."""
    return sum(ck * s**k for k, ck in enumerate(c))


def _real_roots_in(c, lo, hi):
    """Real roots in (lo, hi) of the polynomial c (lowest coefficient first)."""
    c = list(c)
    while len(c) > 1 and c[-1] == 0.0:
        c.pop()
    if len(c) <= 1:
        return []
    roots = np.roots(c[::-1])
    out = []
    for r in roots:
        if abs(r.imag) <= 1e-7 * max(1.0, abs(r.real)):
            x = r.real
            # Polish by Newton on the real polynomial.
            dc = [k * c[k] for k in range(1, len(c))]
            for _ in range(8):
                d = _poly(dc, x)
                if d == 0.0:
                    break
                x = x - _poly(c, x) / d
            if lo < x < hi:
                out.append(x)
    return sorted(out)


def _bisect(c, lo, hi):
    flo = _poly(c, lo)
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return hi
        fm = _poly(c, mid)
        if fm == 0.0:
            return mid
        if (fm > 0.0) == (flo > 0.0):
            lo, flo = mid, fm
        else:
            hi = mid


def first_entry(c, h):
    """First s in [0, h] where the polynomial reaches 0 while decreasing."""
    dc = [k * c[k] for k in range(1, len(c))]
    points = [0.0] + _real_roots_in(dc, 0.0, h) + [h]
    for lo, hi in zip(points[:-1], points[1:]):
        flo, fhi = _poly(c, lo), _poly(c, hi)
        if flo > 0.0:
            if fhi <= 0.0:
                return hi if fhi == 0.0 else _bisect(c, lo, hi)
        elif fhi < flo:
            return lo
    return np.inf


class Oracle:
    """One scenario: arrays as in ``simcore.Scenario`` (validated already)."""

    def __init__(self, radius, mass, pos, vel, walls, controls, t0, t_end, dt,
                 params, gravity=9.81, ground_z=0.0, body_law="impulse"):
        self.r = np.array(radius, float)
        self.m = np.array(mass, float)
        self.p = np.array(pos, float).copy()
        self.v = np.array(vel, float).copy()
        self.nb = len(self.r)
        walls = np.array(walls, float).reshape(-1, 4)
        norms = np.linalg.norm(walls[:, :3], axis=1) if len(walls) else np.zeros(0)
        self.pn = [np.array([0.0, 0.0, 1.0])] + [walls[k, :3] / norms[k] for k in range(len(walls))]
        self.pd = [ground_z] + [walls[k, 3] / norms[k] for k in range(len(walls))]
        self.npl = len(self.pn)
        self.ctrl = np.array(controls, float).reshape(-1, 6)
        self.t = t0
        self.t0 = t0
        self.t_end = t_end
        self.dt = dt
        self.g = gravity
        self.gz = ground_z
        par = dict(params) if isinstance(params, dict) else P.as_dict(params)
        self.body_law = body_law
        self.mu_bb_b, self.mu_bb_c = par.get("mu_bb_b", 0.0), par.get("mu_bb_c", 1.0)
        self.mu_s, self.mu_k, self.vth, self.e_g = par["mu_s"], par["mu_k"], par["v_th"], par["e_bg"]
        self.mu_bb, self.e_bb, self.mu_w, self.e_w = par["mu_bb"], par["e_bb"], par["mu_w"], par["e_bw"]
        nb, npl = self.nb, self.npl
        self.pc = np.zeros((nb, npl), bool)
        self.bc = np.zeros((nb, nb), bool)
        self.rest = np.zeros(nb, bool)
        self.starting = np.zeros(nb, bool)
        self.sdir = np.zeros((nb, 3))
        self.above = np.zeros(nb, bool)
        self.acc = np.zeros((nb, 3))
        self.events = []

    # --- helpers -----------------------------------------------------------

    def plane_e(self, k):
        return self.e_g if k == 0 else self.e_w

    def normal(self, i, j):
        d = self.p[j] - self.p[i]
        return d / np.sqrt(d @ d)

    def hspeed(self, i):
        return np.hypot(self.v[i, 0], self.v[i, 1])

    def log(self, kind, a, b, n, jn, jt, dva, dvb, slip):
        self.events.append(dict(t=self.t, kind=kind, a=a, b=b, n=np.array(n, float),
                                jn=jn, jt=jt, dva=np.array(dva, float),
                                dvb=np.array(dvb, float), slip=slip))

    # --- start ------------------------------------------------------------

    def init_contacts(self):
        for i in range(self.nb):
            for k in range(self.npl):
                gap = self.pn[k] @ self.p[i] - self.pd[k] - self.r[i]
                vn = self.v[i] @ self.pn[k]
                if gap <= GAP_TOL and abs(vn) <= V_CONTACT:
                    self.pc[i, k] = True
                    self.v[i] = self.v[i] - vn * self.pn[k]
                    if k == 0:
                        self.p[i, 2] = self.gz + self.r[i]
            if self.pc[i, 0]:
                if self.hspeed(i) <= V_STOP:
                    self.v[i, :2] = 0.0
                    self.rest[i] = True
                self.above[i] = self.hspeed(i) >= self.vth
        for i in range(self.nb):
            for j in range(i + 1, self.nb):
                gap = np.linalg.norm(self.p[j] - self.p[i]) - self.r[i] - self.r[j]
                if gap <= GAP_TOL:
                    n = self.normal(i, j)
                    if abs((self.v[j] - self.v[i]) @ n) <= V_CONTACT:
                        self.bc[i, j] = self.bc[j, i] = True

    # --- contact forces ----------------------------------------------------

    def tangent(self, vec, n):
        t = vec - (vec @ n) * n
        size = np.sqrt(t @ t)
        return (t / size if size > 0 else np.zeros(3)), size

    def solve(self, free, h_dir=0.0):
        nb = self.nb
        started = []
        clamp = {}  # (kind, i, j) -> clamp order
        ptan = np.zeros((nb, 3))
        if h_dir > 0.0:
            for i in range(nb):
                ptan[i] = free[i]
                for k in range(self.npl):
                    if self.pc[i, k]:
                        ptan[i] = ptan[i] - (ptan[i] @ self.pn[k]) * self.pn[k]
        hold = set()
        for _outer in range(nb + 1):
            clamp = {}
            for _ in range(1000):
                cols = []  # (kind, i, j, W column (3nb,), H row (3nb,))
                for i in range(nb):
                    for k in range(self.npl):
                        if not self.pc[i, k]:
                            continue
                        n = self.pn[k]
                        t, size = self.tangent(self.v[i] + h_dir * ptan[i], n)
                        if size == 0.0 and self.starting[i]:
                            t, _ = self.tangent(self.sdir[i], n)
                        mu = (self.mu_k if self.above[i] else self.mu_s) if k == 0 else self.mu_w
                        if self.rest[i]:
                            mu = 0.0
                        w = np.zeros(3 * nb)
                        w[3 * i:3 * i + 3] = n - mu * t
                        hrow = np.zeros(3 * nb)
                        hrow[3 * i:3 * i + 3] = n
                        cols.append(("plane", i, k, w, hrow))
                    for j in range(i + 1, nb):
                        if not self.bc[i, j]:
                            continue
                        n = self.normal(i, j)
                        t, size = self.tangent(self.v[j] - self.v[i], n)
                        if size <= V_STOP:
                            t = np.zeros(3)
                        g = n - self.mu_bb * t
                        w = np.zeros(3 * nb)
                        w[3 * j:3 * j + 3] = g
                        w[3 * i:3 * i + 3] = -g
                        hrow = np.zeros(3 * nb)
                        hrow[3 * j:3 * j + 3] = n
                        hrow[3 * i:3 * i + 3] = -n
                        cols.append(("body", i, j, w, hrow))
                    if self.rest[i]:
                        for axis in range(2):
                            e = np.zeros(3 * nb)
                            e[3 * i + axis] = 1.0
                            cols.append(("static", i, axis, e, e.copy()))
                if not cols:
                    self.acc = free.copy()
                    return False, started
                minv = np.repeat(1.0 / self.m, 3)
                W = np.array([c[3] for c in cols]).T
                H = np.array([c[4] for c in cols])
                A = H @ (minv[:, None] * W)
                b = -H @ free.reshape(-1)
                order = np.array([clamp.get(c[:3], 0) for c in cols])
                if not order.any() and np.linalg.matrix_rank(A, tol=1e-10 * np.abs(A).max()) == len(cols):
                    z = np.linalg.solve(A, b)
                else:
                    # Redundant or clamped: the minimum-norm force set, clamped
                    # normal forces held at zero, their rows kept.
                    Ar = A.copy()
                    Ar[:, order > 0] = 0.0
                    gram = Ar @ Ar.T
                    gram += 1e-13 * gram.diagonal().max() * np.eye(len(cols))
                    z = Ar.T @ np.linalg.solve(gram, b)
                    if order.any() and np.abs(Ar @ z - b).max() > 1e-9 * (np.abs(b).max() + 1e-300):
                        kind, i, j = cols[int(np.argmax(order))][:3]
                        if kind == "plane":
                            self.pc[i, j] = False
                            if j == 0:
                                self.rest[i] = False
                                self.starting[i] = False
                        else:
                            self.bc[i, j] = self.bc[j, i] = False
                        clamp.clear()
                        continue
                # Clamp the most negative normal force.
                worst, worst_val = -1, 0.0
                for u, c in enumerate(cols):
                    if c[0] in ("plane", "body"):
                        scale = N_TOL * self.m[c[1]] * (1.0 + abs(free[c[1], 2]))
                        if z[u] < -scale and z[u] < worst_val:
                            worst, worst_val = u, z[u]
                if worst >= 0:
                    clamp[cols[worst][:3]] = len(clamp) + 1 + max(clamp.values(), default=0)
                    continue
                changed = False
                for u, c in enumerate(cols):
                    if c[0] != "static" or c[2] != 0:
                        continue
                    i = c[1]
                    s = np.array([z[u], z[u + 1]])
                    for w, cc in enumerate(cols):
                        if cc[0] == "plane" and cc[1] == i and cc[2] > 0 and self.pn[cc[2]][2] == 0.0:
                            nh = self.pn[cc[2]][:2]
                            delta = max(s @ nh, -z[w])
                            z[w] += delta
                            s = s - delta * nh
                    z[u], z[u + 1] = s
                    cap = sum((self.mu_s if cc[2] == 0 else self.mu_w) * z[w]
                              for w, cc in enumerate(cols) if cc[0] == "plane" and cc[1] == i)
                    smag = np.sqrt(s @ s)
                    if i not in hold and smag > cap * (1 + 1e-12) + 1e-300:
                        self.rest[i] = False
                        self.starting[i] = True
                        started.append(i)
                        self.sdir[i] = [-s[0] / smag, -s[1] / smag, 0.0]
                        changed = True
                        clamp.clear()
                if not changed:
                    break
            acc = free.reshape(-1) + minv * (W @ z)
            acc = acc.reshape(nb, 3)
            for i in range(nb):
                if self.rest[i]:
                    acc[i] = 0.0
                    continue
                for k in range(self.npl):
                    if self.pc[i, k]:
                        acc[i] = acc[i] - (acc[i] @ self.pn[k]) * self.pn[k]
                if self.pc[i, 0]:
                    acc[i, 2] = 0.0
            back = [i for i in started if acc[i, :2] @ self.sdir[i, :2] <= 0.0]
            if not back:
                break
            for i in back:  # decelerates at once: static friction holds it
                self.rest[i] = True
                self.starting[i] = False
                started.remove(i)
                hold.add(i)
        self.acc = acc
        rotating = False
        for c in cols:
            kind, i, j = c[:3]
            if kind == "body":
                n = self.normal(i, j)
                if self.tangent(self.v[j] - self.v[i], n)[1] > V_STOP:
                    rotating = True
            elif kind == "plane":
                n = self.pn[j]
                t, size = self.tangent(self.v[i], n)
                if size == 0.0:
                    if not self.starting[i]:
                        continue
                    t, _ = self.tangent(self.sdir[i], n)
                at = acc[i] - (acc[i] @ n) * n
                perp = at - (at @ t) * t
                if np.sqrt(perp @ perp) > DIR_TOL * (np.sqrt(at @ at) + 1.0):
                    rotating = True
        return rotating, started

    # --- impacts -----------------------------------------------------------

    def impact_plane(self, i, k, propagated=False):
        n = self.pn[k]
        vn = self.v[i] @ n
        sustained = propagated or (-vn < V_CONTACT and self.acc[i] @ n <= 0.0)
        e = 0.0 if sustained else self.plane_e(k)
        mu = (self.mu_k if self.hspeed(i) >= self.vth else self.mu_s) if k == 0 else self.mu_w
        jn = max(0.0, -(1 + e) * vn)
        t, vt = self.tangent(self.v[i], n)
        jt, slip = (vt, 0) if vt <= mu * jn else (mu * jn, 1)
        if slip:
            dv = jn * n - jt * t
            self.v[i] = self.v[i] + dv
        else:
            dv = (vn + jn) * n - self.v[i]
            self.v[i] = (vn + jn) * n
        if sustained:
            self.pc[i, k] = True
            self.v[i] = self.v[i] - (self.v[i] @ n) * n
            if k == 0:
                self.p[i, 2] = self.gz + self.r[i]
        self.log("body-ground" if k == 0 else "body-wall", i, k - 1, n, jn * self.m[i],
                 jt * self.m[i], dv, np.zeros(3), slip)
        self.after_change(i)

    def impact_body(self, i, j):
        n = self.normal(i, j)
        u = self.v[j] - self.v[i]
        un = u @ n
        sustained = -un < V_CONTACT and (self.acc[j] - self.acc[i]) @ n <= 0.0
        e = 0.0 if sustained else self.e_bb
        meff = 1.0 / (1.0 / self.m[i] + 1.0 / self.m[j])
        jn = max(0.0, -(1 + e) * un * meff)
        t, ut = self.tangent(u, n)
        jstick = ut * meff
        if self.body_law == "frictional_inelastic":
            # pooltool's bound: a velocity change of mu e |u_n| per (equal-mass) ball.
            mu = self.mu_bb + self.mu_bb_b * np.exp(-self.mu_bb_c * ut)
            jslip = 2.0 * mu * e * -un / (1.0 / self.m[i] + 1.0 / self.m[j]) if un < 0 else 0.0
        else:
            jslip = self.mu_bb * jn
        jt, slip = (jstick, 0) if jstick <= jslip else (jslip, 1)
        imp = jn * n - jt * t
        dvj, dvi = imp / self.m[j], -imp / self.m[i]
        self.v[j] = self.v[j] + dvj
        self.v[i] = self.v[i] + dvi
        if sustained:
            self.bc[i, j] = self.bc[j, i] = True
            self.zero_normal(i, j, n, (self.v[j] - self.v[i]) @ n)
        self.log("body-body", i, j, n, jn, jt, dvi, dvj, slip)

    def zero_normal(self, i, j, n, un):
        wsum = 1.0 / self.m[i] + 1.0 / self.m[j]
        self.v[j] = self.v[j] - un * n * (1.0 / self.m[j]) / wsum
        self.v[i] = self.v[i] + un * n * (1.0 / self.m[i]) / wsum

    def after_change(self, i):
        self.starting[i] = False
        if self.pc[i, 0]:
            vh = self.hspeed(i)
            self.rest[i] = vh <= V_STOP
            if self.rest[i]:
                self.v[i, :2] = 0.0
            self.above[i] = vh >= self.vth
        else:
            self.rest[i] = False

    def propagate(self, work):
        for _ in range(4 * self.nb):
            changed = False
            for i in range(self.nb):
                if not work[i]:
                    continue
                work[i] = False
                for k in range(self.npl):
                    if not self.pc[i, k]:
                        continue
                    vn = self.v[i] @ self.pn[k]
                    if vn < -V_ROUND:
                        self.pc[i, k] = False
                        self.impact_plane(i, k, propagated=True)
                        changed = True
                        work[i] = True
                    elif vn > V_ROUND and (vn >= V_CONTACT or self.acc[i] @ self.pn[k] > 0.0):
                        self.pc[i, k] = False
                        if k == 0:
                            self.rest[i] = False
                            self.starting[i] = False
                    else:
                        self.v[i] = self.v[i] - vn * self.pn[k]
                for j in range(self.nb):
                    if j == i or not self.bc[i, j]:
                        continue
                    lo, hi = min(i, j), max(i, j)
                    n = self.normal(lo, hi)
                    un = (self.v[hi] - self.v[lo]) @ n
                    if un < -V_ROUND:
                        self.bc[lo, hi] = self.bc[hi, lo] = False
                        self.impact_body(lo, hi)
                        self.after_change(lo)
                        self.after_change(hi)
                        work[lo] = work[hi] = True
                        changed = True
                    elif un > V_ROUND and (un >= V_CONTACT or (self.acc[hi] - self.acc[lo]) @ n > 0.0):
                        self.bc[lo, hi] = self.bc[hi, lo] = False
                    else:
                        self.zero_normal(lo, hi, n, un)
            if not changed:
                break
        for i in range(self.nb):
            self.after_change(i)

    # --- the loop ------------------------------------------------------------

    def run(self, sample_times=()):
        samples = []
        sample_times = list(sample_times)
        self.init_contacts()
        while sample_times and sample_times[0] <= self.t:
            samples.append((self.p.copy(), self.v.copy()))
            sample_times.pop(0)
        need_solve = True
        horizon = self.t
        nb = self.nb
        while self.t < self.t_end:
            kgrid = np.floor((self.t - self.t0) / self.dt)
            grid_next = self.t0 + (kgrid + 1.0) * self.dt
            if grid_next <= self.t:
                grid_next = self.t0 + (kgrid + 2.0) * self.dt
            if need_solve:
                force = np.zeros((nb, 3))
                edge = self.t_end
                for b, t0, t1, fx, fy, fz in self.ctrl:
                    if t0 <= self.t < t1:
                        force[int(b)] += [fx, fy, fz]
                    for te in (t0, t1):
                        if self.t < te < edge:
                            edge = te
                free = force / self.m[:, None]
                free[:, 2] -= self.g
                rotating, started = self.solve(free)
                for i in started:
                    self.log("start", i, -1, self.sdir[i], 0.0, 0.0, np.zeros(3), np.zeros(3), -1)
                    self.above[i] = False
                if rotating:
                    _, started = self.solve(free, min(grid_next, self.t_end) - self.t)
                    for i in started:
                        self.log("start", i, -1, self.sdir[i], 0.0, 0.0, np.zeros(3),
                                 np.zeros(3), -1)
                        self.above[i] = False
                horizon = edge
                if rotating and grid_next < horizon:
                    horizon = grid_next
                need_solve = False
            h = horizon - self.t
            best, code, ei, ej = h, None, -1, -1
            a = self.acc
            for i in range(nb):
                if self.rest[i]:
                    continue
                if self.pc[i].any():
                    speed = np.sqrt(self.v[i] @ self.v[i])
                    if speed > 0.0:
                        at = (a[i] @ self.v[i]) / speed
                        if at < 0.0:
                            s = -speed / at
                            if s <= best and s < best:
                                best, code, ei = s, "stop", i
                if self.pc[i, 0] and self.mu_s != self.mu_k:
                    sign = 1.0 if self.above[i] else -1.0
                    c = [sign * (self.v[i] @ self.v[i] - self.vth**2),
                         sign * 2.0 * (self.v[i] @ a[i]), sign * (a[i] @ a[i])]
                    if c[1] != 0.0 or c[2] != 0.0:
                        s = first_entry(c, best)
                        if s < best:
                            best, code, ei = s, "vth", i
                for j in range(i + 1, nb):
                    if not self.bc[i, j]:
                        continue
                    n = self.normal(i, j)
                    u = self.v[j] - self.v[i]
                    b = a[j] - a[i]
                    ut = u - (u @ n) * n
                    bt = b - (b @ n) * n
                    if ut @ ut <= V_STOP * V_STOP:
                        continue
                    speed = np.sqrt(ut @ ut)
                    if speed > 0.0:
                        at = (bt @ ut) / speed
                        if at < 0.0 and -speed / at <= best and -speed / at < best:
                            best, code, ei, ej = -speed / at, "stick", i, j
            for i in range(nb):
                for k in range(self.npl):
                    if self.pc[i, k]:
                        continue
                    n = self.pn[k]
                    gap = n @ self.p[i] - self.pd[k] - self.r[i]
                    if abs(gap) <= GAP_TOL and a[i] @ n > 0.0 and self.v[i] @ n > -V_ROUND:
                        continue
                    c = [gap, self.v[i] @ n, 0.5 * (a[i] @ n)]
                    if c[0] - abs(c[1]) * best - abs(c[2]) * best * best > 0.0:
                        continue
                    s = first_entry(c, best)
                    if s < best:
                        best, code, ei, ej = s, "plane", i, k
                for j in range(i + 1, nb):
                    if self.bc[i, j]:
                        continue
                    d = self.p[j] - self.p[i]
                    w = self.v[j] - self.v[i]
                    b = a[j] - a[i]
                    big_r = self.r[i] + self.r[j]
                    dist = np.sqrt(d @ d)
                    gap = dist - big_r
                    if abs(gap) <= GAP_TOL:
                        n = d / dist
                        if b @ n > 0.0 and w @ n > -V_ROUND:
                            continue
                    if gap - np.sqrt(w @ w) * best - 0.5 * np.sqrt(b @ b) * best**2 > 0.0:
                        continue
                    c = [gap * (dist + big_r), 2.0 * (d @ w), w @ w + d @ b, w @ b, 0.25 * (b @ b)]
                    s = first_entry(c, best)
                    if s < best:
                        best, code, ei, ej = s, "body", i, j
            t_new = horizon if code is None else min(self.t + best, horizon)
            while sample_times and sample_times[0] <= t_new:
                tau = sample_times.pop(0) - self.t
                samples.append((self.p + self.v * tau + a * (0.5 * tau * tau), self.v + a * tau))
            tau = t_new - self.t
            self.p = self.p + self.v * tau + a * (0.5 * tau * tau)
            self.v = self.v + a * tau
            self.t = t_new
            need_solve = True
            if code is None:
                continue
            work = np.zeros(nb, bool)
            if code == "plane":
                self.impact_plane(ei, ej)
                work[ei] = True
            elif code == "body":
                self.impact_body(ei, ej)
                work[ei] = work[ej] = True
            elif code == "stop":
                before = self.v[ei].copy()
                self.v[ei] = 0.0
                if self.pc[ei, 0]:
                    self.rest[ei] = True
                    self.starting[ei] = False
                    self.above[ei] = False
                    self.log("stop", ei, -1, np.zeros(3), 0.0, 0.0, -before, np.zeros(3), -1)
                continue
            elif code == "vth":
                self.above[ei] = not self.above[ei]
                continue
            elif code == "stick":
                n = self.normal(ei, ej)
                u = self.v[ej] - self.v[ei]
                ut = u - (u @ n) * n
                wsum = 1.0 / self.m[ei] + 1.0 / self.m[ej]
                self.v[ej] = self.v[ej] - ut * (1.0 / self.m[ej]) / wsum
                self.v[ei] = self.v[ei] + ut * (1.0 / self.m[ei]) / wsum
                continue
            self.propagate(work)
        while sample_times:
            sample_times.pop(0)
            samples.append((self.p.copy(), self.v.copy()))
        return samples
