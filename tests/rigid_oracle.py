"""A NumPy reference of the time-stepper's step (simcore/rigid_engine.py).

Written apart from the kernels, with matrices where the kernels use scalar
formulas: rotation matrices instead of quaternion sandwiches, world inertia
tensors and ``np.linalg.solve`` instead of the frame-by-frame products, the
implicit gyroscopic step as a 3x3 solve, the 2x2 tangential matrices from
``J M^-1 J^T``.  The same choices as the kernels where the physics leaves one
open (the order of the contact points, the sweeps, the face choice), so a
trajectory agrees to rounding.
"""

import numpy as np

from simcore.laws import penalty as PN

KIND_GROUND, KIND_BODY, KIND_WALL = 0, 1, 2
SWEEPS = 8


def rot(q):
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def qmul(a, b):
    w1, v1 = a[0], a[1:]
    w2, v2 = b[0], b[1:]
    return np.r_[w1 * w2 - v1 @ v2, w1 * v2 + w2 * v1 + np.cross(v1, v2)]


class Body:
    """A body whose ``pos`` and ``v`` are its centre of mass's; ``com`` the
    centre of mass in the body frame from the box's centre (the geometry's
    origin, :meth:`centre`)."""

    def __init__(self, shape, pos, quat, vel, omega, mass, inertia, ext, mat=0, fixed=False,
                 com=(0.0, 0.0, 0.0)):
        self.shape, self.fixed, self.mat = shape, fixed, mat
        self.pos, self.q = np.array(pos, float), np.array(quat, float)
        self.v, self.w = np.array(vel, float), np.array(omega, float)
        self.m, self.I, self.ext = mass, np.array(inertia, float), np.array(ext, float)
        self.com = np.array(com, float)

    def centre(self):
        return self.pos - rot(self.q) @ self.com

    def inv_m(self):
        return 0.0 if self.fixed else 1.0 / self.m

    def inv_I_world(self):
        if self.fixed:
            return np.zeros((3, 3))
        R = rot(self.q)
        return R @ np.diag(1.0 / self.I) @ R.T

    def point_vel(self, p):
        return self.v + np.cross(self.w, p - self.pos)


def corners(b):
    R = rot(b.q)
    return [b.centre() + R @ (np.array([1.0 if k & 1 else -1.0, 1.0 if k & 2 else -1.0,
                                    1.0 if k & 4 else -1.0]) * b.ext) for k in range(8)]


def key(i, other, feature):
    return (i * 4096 + other) * 65536 + feature


def face(b, f):
    a, s = f // 2, (1.0 if f % 2 else -1.0)
    R = rot(b.q)
    n = R[:, a]
    return (b.centre() + s * b.ext[a] * n, s * n, R[:, (a + 1) % 3], b.ext[(a + 1) % 3],
            R[:, (a + 2) % 3], b.ext[(a + 2) % 3])


def least_overlap(a, b):
    """SAT on b's face axes: (face of b towards a, overlap)."""
    Ra, Rb = rot(a.q), rot(b.q)
    d = Rb.T @ (a.centre() - b.centre())
    overlap = b.ext + np.abs(Rb.T @ Ra) @ a.ext - np.abs(d)
    k = int(np.argmin(overlap))
    return 2 * k + (1 if d[k] >= 0 else 0), overlap[k]


def opposed_face(b, n):
    dots = rot(b.q).T @ n
    a = int(np.argmax(np.abs(dots)))
    return 2 * a + (0 if dots[a] >= 0 else 1)


def entry(a0, b0, a1, b1, hu, hv):
    """(s, slab entered by) of the segment clipped to the rectangle."""
    lo, hi, by = 0.0, 1.0, 0
    for slab, (p, q0, half) in enumerate(((a1 - a0, a0, hu), (b1 - b0, b0, hv))):
        for sign in (1.0, -1.0):
            dp, room = sign * p, half - sign * q0
            if dp == 0.0:
                if room < 0.0:
                    return -1.0, by
            elif dp > 0:
                hi = min(hi, room / dp)
            elif room / dp > lo:
                lo, by = room / dp, slab
    return (lo if lo <= hi else -1.0), by


def box_box(pts, i, j, bi, bj):
    fj, sj = least_overlap(bi, bj)
    fi, si = least_overlap(bj, bi)
    if sj <= si:
        fi = opposed_face(bi, face(bj, fj)[1])
    else:
        fj = opposed_face(bj, face(bi, fi)[1])
    Fi, Fj = face(bi, fi), face(bj, fj)
    if Fi[3] * Fi[5] <= Fj[3] * Fj[5]:
        one, two, F1, F2, feat = i, j, Fi, Fj, (fi * 6 + fj) * 16
    else:
        one, two, F1, F2, feat = j, i, Fj, Fi, (36 + fj * 6 + fi) * 16
    o1, _, u1, l1, v1, w1 = F1
    o2, n2, u2, l2, v2, w2 = F2
    signs = [(1, 1), (-1, 1), (-1, -1), (1, -1)]
    cs = [o1 + su * l1 * u1 + sv * w1 * v1 for su, sv in signs]
    for k in range(4):
        a0, b0 = (cs[k] - o2) @ u2, (cs[k] - o2) @ v2
        inside = abs(a0) <= l2 and abs(b0) <= w2
        cand = []
        if inside:
            cand.append((0, cs[k], n2))
        else:
            for variant, m in ((1, (k + 1) % 4), (2, (k + 3) % 4)):
                s, by = entry(a0, b0, (cs[m] - o2) @ u2, (cs[m] - o2) @ v2, l2, w2)
                if s >= 0:
                    n = np.cross(cs[m] - cs[k], v2 if by == 0 else u2)
                    if np.linalg.norm(n) <= 1e-9 * np.linalg.norm(cs[m] - cs[k]):
                        n = n2
                    n = n / np.linalg.norm(n) * np.sign(n @ n2)
                    cand.append((variant, cs[k] + s * (cs[m] - cs[k]), n))
        for variant, p, n in cand:
            height = n2 @ (p - o2)
            if height <= 0:
                depth = -height * (n @ n2)
                pts.append(dict(i=one, j=two, plane=-1, kind=KIND_BODY,
                                key=key(one, two, feat + 3 * k + variant),
                                p=p + 0.5 * depth * n, n=n, depth=depth))


def detect(bodies, planes):
    pts = []
    for i, b in enumerate(bodies):
        if b.fixed:
            continue
        for k, (n, d) in enumerate(planes):
            kind = KIND_GROUND if k == 0 else KIND_WALL
            if b.shape == "sphere":
                depth = b.ext[0] - (n @ b.pos - d)
                if depth > 0:
                    pts.append(dict(i=i, j=-1, plane=k, kind=kind, key=key(i, 64 + k, 0),
                                    p=b.pos - (b.ext[0] - 0.5 * depth) * n, n=n, depth=depth))
            else:
                for c_id, c in enumerate(corners(b)):
                    depth = d - n @ c
                    if depth > 0:
                        pts.append(dict(i=i, j=-1, plane=k, kind=kind, key=key(i, 64 + k, c_id),
                                        p=c + 0.5 * depth * n, n=n, depth=depth))
    for i, bi in enumerate(bodies):
        for j in range(i + 1, len(bodies)):
            bj = bodies[j]
            if bi.fixed and bj.fixed:
                continue
            ri = bi.ext[0] if bi.shape == "sphere" else np.linalg.norm(bi.ext)
            rj = bj.ext[0] if bj.shape == "sphere" else np.linalg.norm(bj.ext)
            if np.sum((bi.centre() - bj.centre()) ** 2) > (ri + rj) ** 2:
                continue
            if bi.shape == "box" and bj.shape == "box":
                box_box(pts, i, j, bi, bj)
            elif bi.shape == "sphere" and bj.shape == "sphere":
                d = bi.pos - bj.pos
                dist = np.linalg.norm(d)
                if ri + rj - dist > 0:
                    n = d / dist
                    depth = ri + rj - dist
                    pts.append(dict(i=i, j=j, plane=-1, kind=KIND_BODY, key=key(i, j, 0),
                                    p=bj.pos + (rj - 0.5 * depth) * n, n=n, depth=depth))
            else:
                raise NotImplementedError("sphere-box: covered by the kernels' own tests")
    return pts


def row_of(table, laws, bodies, planes_mat, c):
    i, j = c["i"], c["j"]
    other = bodies[j].mat if j >= 0 else planes_mat[c["plane"]]
    return table[c["kind"], bodies[i].mat, other]


def step(bodies, planes, planes_mat, table, laws, cone, gravity, h, memory):
    """One step, in place; ``memory`` maps keys to first-touch speeds (replaced)."""
    pts = detect(bodies, planes)
    force = [np.zeros(3) for _ in bodies]
    torque = [np.zeros(3) for _ in bodies]
    new_memory = {}
    for c in pts:
        i, j = c["i"], c["j"]
        vrel = bodies[i].point_vel(c["p"]) - (bodies[j].point_vel(c["p"]) if j >= 0 else 0)
        vn = vrel @ c["n"]
        vi = memory.get(c["key"], max(-vn, 0.0))
        new_memory[c["key"]] = vi
        row = row_of(table, laws, bodies, planes_mat, c)
        f, damping = PN.spring_damper_py(laws[c["kind"]], row, c["depth"], vi)
        vt = vrel - vn * c["n"]
        c.update(fs=f, cd=damping, slip=np.linalg.norm(vt), row=row)
        total = f * c["n"] - row[PN.C_KV] * vt
        for k, sign in ((i, 1.0), (j, -1.0)):
            if k >= 0 and not bodies[k].fixed:
                force[k] += sign * total
                torque[k] += np.cross(c["p"] - bodies[k].pos, sign * total)
    memory.clear()
    memory.update(new_memory)
    for k, b in enumerate(bodies):
        if b.fixed:
            continue
        b.v = b.v + h * (force[k] / b.m - np.array([0, 0, gravity]))
        R = rot(b.q)
        wb = R.T @ b.w + h * (R.T @ torque[k]) / b.I
        Iw = b.I * wb
        f_res = h * np.cross(wb, Iw)
        if np.any(f_res != 0):
            skew = lambda a: np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])  # noqa: E731
            J = np.diag(b.I) + h * (skew(wb) @ np.diag(b.I) - skew(Iw))
            wb = wb - np.linalg.solve(J, f_res)
        b.w = R @ wb
    active = pts
    for c in active:
        n = c["n"]
        e = np.array([1.0, 0, 0]) if abs(n[0]) < 0.9 else np.array([0, 1.0, 0])
        t1 = e - (e @ n) * n
        t1 /= np.linalg.norm(t1)
        T = np.stack([t1, np.cross(n, t1)])
        B = np.stack([n, T[0], T[1]])  # normal, then the tangent axes
        K = np.zeros((3, 3))
        for k in (c["i"], c["j"]):
            if k >= 0 and not bodies[k].fixed:
                r = c["p"] - bodies[k].pos
                A = np.stack([np.cross(r, t) for t in B])
                K += bodies[k].inv_m() * np.eye(3) + A @ bodies[k].inv_I_world() @ A.T
        c.update(T=T, K=K[1:, 1:], knn=K[0, 0], P=np.zeros(2), Pd=0.0)

    def rel(c):
        i, j = c["i"], c["j"]
        return bodies[i].point_vel(c["p"]) - (bodies[j].point_vel(c["p"]) if j >= 0 else 0)

    def push(c, J):
        for k, sign in ((c["i"], 1.0), (c["j"], -1.0)):
            if k >= 0 and not bodies[k].fixed:
                bodies[k].v = bodies[k].v + sign * J * bodies[k].inv_m()
                bodies[k].w = bodies[k].w + bodies[k].inv_I_world() @ np.cross(
                    c["p"] - bodies[k].pos, sign * J)

    for _ in range(SWEEPS):
        for c in active:
            # implicit damping at the end-of-step approach rate
            rate = -(rel(c) @ c["n"]) + c["knn"] * c["Pd"]
            ch = c["cd"] * h
            pd = max(ch * rate / (1 + ch * c["knn"]), -c["fs"] * h)
            push(c, (pd - c["Pd"]) * c["n"])
            c["Pd"] = pd
            cap = PN.stiction.py_func(c["row"], c["slip"]) * max(c["fs"] + pd / h, 0.0) * h
            u = c["T"] @ rel(c)
            p_new = c["P"] - np.linalg.solve(c["K"], u)
            norm = (np.abs(p_new).sum() if cone == PN.CONE_PYRAMIDAL else np.linalg.norm(p_new))
            if norm > cap:
                free = u - c["K"] @ c["P"]
                fnorm = np.abs(free).sum() if cone == PN.CONE_PYRAMIDAL else np.linalg.norm(free)
                p_new = -cap * free / fnorm if fnorm > 0 else np.zeros(2)
            push(c, c["T"].T @ (p_new - c["P"]))
            c["P"] = p_new
    for b in bodies:
        if b.fixed:
            continue
        b.pos = b.pos + h * b.v
        wn = np.linalg.norm(b.w)
        half = 0.5 * h * wn
        dq = np.r_[np.cos(half), np.sin(half) * b.w / wn] if wn > 0 else np.array([1.0, 0, 0, 0])
        q = qmul(dq, b.q)
        b.q = q / np.linalg.norm(q)
    return pts
