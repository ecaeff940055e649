"""Targets derived from measured trajectories: initial and final states, and
collision events detected from velocity jumps.

Measured data usually has positions only, with noise.  Velocities are never
taken from single differences (noise sigma becomes ``sqrt(2) sigma / dt``,
0.14 m/s for 1 mm at 100 Hz); they come from local fits.

State at an end (:func:`end_states`)
    A least-squares quadratic ``p(t) = p0 + v t + a t^2 / 2`` over the first
    (or last) ``window`` samples of each body: exact for the piecewise
    constant accelerations of a sliding body, and it averages the noise.
    One robust pass follows: samples whose residual exceeds 3 times the
    residuals' scaled MAD are dropped and the fit repeated.  All bodies are
    fitted at once (batched normal equations).  Snapping a resting height
    onto the ground is the reader's (``dataset.fitted_initial_states``).

Collision detection (:func:`detect_events`)
    At every sample k, the velocity jump ``dv_k = v_after - v_before``
    between the slopes of straight-line fits over the ``half`` samples
    after and before it.  A jump is an event where ``|dv_k|`` is a local
    maximum (within ``half`` samples) and exceeds
    ``max(min_dv, k_sigma * noise)``, ``noise`` being the scaled MAD of the
    components of ``dv`` over the whole dataset (the tracker's per-axis noise
    on a jump estimate; impacts are rare, so they do not move the median;
    an evenly strided ``MAD_SAMPLES`` of them on big sets): a threshold that
    follows the data's noise.  Friction's smooth decelerations stay far
    below it.  All bodies are processed at once, the window fits and the
    peak search in parallel numba kernels.  The time of the event is that
    sample's time.  Two impacts closer than ``half`` samples merge into one.

Position noise (:func:`position_noise`)
    The tracker's noise on one coordinate, from the second differences
    ``x[k+1] - 2 x[k] + x[k-1]`` of equally spaced samples: for independent
    noise of standard deviation sigma their variance is ``6 sigma^2`` (plus
    the motion's ``a dt^2``, small between impacts), so sigma is their scaled
    MAD over ``sqrt(6)``.  Impacts are rare and do not move the median.
    Noiseless data give the motion's own small term, never zero unless
    nothing moves.
"""

import numpy as np
from numba import njit, prange

from ..kernel.config import JIT_PARALLEL

MAD_SCALE = 1.4826  # MAD -> standard deviation for Gaussian noise
#: The detector's noise scale comes from at most this many jump components,
#: evenly strided over the dataset (the MAD of a million values is within a
#: few tenths of a percent of the whole set's).
MAD_SAMPLES = 1_000_000
#: The detector walks the series in chunks of about this many samples.
CHUNK_SAMPLES = 1 << 20


def _quadratic_fit(t, p, w):
    """Weighted least-squares quadratics, batched: t (B, K), p (B, K, 3), w (B, K).

    Returns coefficients (B, 3, 3): p0, v, a/2 per coordinate, about t[:, 0].
    """
    tau = t - t[:, :1]
    vand = np.stack([np.ones_like(tau), tau, tau * tau], axis=2)  # (B, K, 3)
    vw = vand * w[:, :, None]
    lhs = np.einsum("bki,bkj->bij", vw, vand)
    rhs = np.einsum("bki,bkd->bid", vw, p)
    return np.linalg.solve(lhs + 1e-300 * np.eye(3), rhs)  # (B, 3, 3)


def end_states(t, p, counts, window=8, at_end=False):
    """Robust position and velocity of each body at its first (or last) sample.

    ``t (N,)`` and ``p (N, 3)`` are all samples sorted by body then time, and
    ``counts (B,)`` the samples of each body.  Returns ``(pos (B, 3),
    vel (B, 3), used (B,))``, ``used`` being the samples kept per body.
    """
    counts = np.asarray(counts)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    k = int(min(window, counts.min()))
    if k < 3:
        raise ValueError(f"end_states: a body has {counts.min()} samples, expected at least 3")
    offs = np.arange(k)
    idx = (starts + counts - k)[:, None] + offs if at_end else starts[:, None] + offs
    tt, pp = t[idx], p[idx]
    w = np.ones(tt.shape)
    coef = _quadratic_fit(tt, pp, w)
    # One robust pass: drop samples beyond 3 scaled MADs and refit.
    tau = tt - tt[:, :1]
    fit = coef[:, 0, None, :] + coef[:, 1, None, :] * tau[..., None] + coef[:, 2, None, :] * tau[..., None] ** 2
    res = np.linalg.norm(pp - fit, axis=2)
    mad = MAD_SCALE * np.median(np.abs(res - np.median(res, axis=1, keepdims=True)), axis=1,
                                keepdims=True)
    w = (res <= 3.0 * np.maximum(mad, 1e-12) + np.median(res, axis=1, keepdims=True)).astype(float)
    coef = _quadratic_fit(tt, pp, w)
    at = (tt[:, -1] - tt[:, 0]) if at_end else np.zeros(len(counts))
    pos = coef[:, 0] + coef[:, 1] * at[:, None] + coef[:, 2] * at[:, None] ** 2
    vel = coef[:, 1] + 2.0 * coef[:, 2] * at[:, None]
    return pos, vel, w.sum(axis=1).astype(int)


@njit(**JIT_PARALLEL)
def _window_fits_kernel(t, p, owner, half, v, c, valid):
    """Centred least-squares lines over every window ``[w, w + half]``
    (windows in parallel: each writes its own row)."""
    n = t.shape[0]
    m = half + 1
    for w in prange(n - half):
        valid[w] = owner[w] == owner[w + half]
        if not valid[w]:
            continue
        tm = 0.0
        for k in range(w, w + m):
            tm += t[k]
        tm /= m
        stt = 0.0
        for k in range(w, w + m):
            stt += (t[k] - tm) * (t[k] - tm)
        for d in range(3):
            pm = 0.0
            for k in range(w, w + m):
                pm += p[k, d]
            pm /= m
            stp = 0.0
            for k in range(w, w + m):
                stp += (t[k] - tm) * (p[k, d] - pm)
            v[w, d] = stp / stt
            c[w, d] = pm - v[w, d] * tm


def _window_fits(t, p, counts, half):
    """Line fits ``p = c + v t`` over every window of ``half + 1`` consecutive
    samples, all bodies at once (a numba scan).

    Window ``w`` covers samples ``[w, w + half]``: it is the "after" window of
    sample ``w`` and the "before" window of sample ``w + half``.  Returns
    ``(v, c, valid, owner)``: slopes and intercepts per window, whether the
    window stays inside one body's series, and the body of each sample.
    """
    owner = np.repeat(np.arange(len(counts)), counts)
    nw = t.shape[0] - half
    v = np.zeros((nw, 3))
    c = np.zeros((nw, 3))
    valid = np.zeros(nw, dtype=np.bool_)
    _window_fits_kernel(np.ascontiguousarray(t, dtype=np.float64),
                        np.ascontiguousarray(p, dtype=np.float64), owner, half, v, c, valid)
    return v, c, valid, owner


def estimate_time_offsets(scen, body, times, dvs, window=0.05):
    """Constant time offset of each body id's samples relative to body id 0.

    Pairs the two bodies' detections of one collision: same scenario, times
    within ``window``, velocity jumps pointing against each other (momentum
    exchange).  The offset of body id j is the median of ``t_j - t_0`` over
    its pairs with body 0.  Returns ``{body_id: (offset_s, pairs)}``.
    """
    out = {}
    by = {}
    for i in range(len(times)):
        by.setdefault(scen[i], []).append(i)
    diffs = {}
    for rows in by.values():
        zero = [i for i in rows if body[i] == 0]
        for i in zero:
            for j in rows:
                if body[j] == 0 or abs(times[j] - times[i]) > window:
                    continue
                cos = dvs[i] @ dvs[j] / (np.linalg.norm(dvs[i]) * np.linalg.norm(dvs[j]))
                if cos < -0.5:
                    diffs.setdefault(int(body[j]), []).append(times[j] - times[i])
    for b, d in sorted(diffs.items()):
        out[b] = (float(np.median(d)), len(d))
    return out


@njit(**JIT_PARALLEL)
def _jumps(v, valid, half, dv, mag, ok):
    """``dv[i]``: the slope of the window after sample ``i + half`` minus the
    one before it; ``ok[i]``: both windows inside one body; ``mag`` its size
    (0 where not ok)."""
    for i in prange(dv.shape[0]):
        ok[i] = valid[i] and valid[i + half]
        size = 0.0
        for d in range(3):
            dv[i, d] = v[i + half, d] - v[i, d]
            size += dv[i, d] * dv[i, d]
        mag[i] = np.sqrt(size) if ok[i] else 0.0


@njit(**JIT_PARALLEL)
def _peaks(mag, ok, own, half, thr, peak):
    """``peak[i]``: ``mag[i]`` exceeds ``thr`` and is a local maximum within
    ``+-half`` samples of the same body (ties go to the earliest sample)."""
    n = mag.shape[0]
    for i in prange(n):
        is_peak = ok[i] and mag[i] > thr
        for s in range(1, half + 1):
            if not is_peak:
                break
            if i - s >= 0 and own[i - s] == own[i] and mag[i] < mag[i - s]:
                is_peak = False
            if i + s < n and own[i + s] == own[i] and mag[i] <= mag[i + s]:
                is_peak = False
        peak[i] = is_peak


def detect_events(t, p, counts, half=5, k_sigma=8.0, min_dv=0.2):
    """Collision events of each body from velocity jumps (see module doc).

    Same layout as :func:`end_states`.  Returns ``(body, time, dv)`` arrays:
    the body index, the event time and the estimated velocity jump (3,).
    The series are walked in chunks of whole series of about
    ``CHUNK_SAMPLES`` samples (:func:`detect_events_in`).
    """
    counts = np.asarray(counts, np.int64)
    chunks = _chunks(counts, CHUNK_SAMPLES)

    def source():
        for q0, q1, r0, r1 in chunks:
            yield t[r0:r1], p[r0:r1], counts[q0:q1]

    return detect_events_in(source, counts, half, k_sigma, min_dv)


def detect_events_in(source, counts, half=5, k_sigma=8.0, min_dv=0.2):
    """:func:`detect_events` over series that come in chunks: ``source()``
    returns an iterator of ``(t, p (n, 3), counts)`` chunks of whole series,
    the same each time it is called, and ``counts`` holds every series'
    sample count in that order.  The scratch memory is one chunk's whatever
    the dataset's size: a first pass takes the noise scale from an evenly
    strided sample of the jump components (the same sample as one pass over
    the whole set would take), a second finds the peaks (one pass when the
    source gives a single chunk).  Body indices count series in source order.
    """
    counts = np.asarray(counts, np.int64)
    none = np.zeros(0, int), np.zeros(0), np.zeros((0, 3))
    if counts.sum() < 2 * half + 1:
        return none
    noise, kept = _noise_scale(source, counts, half)
    if noise is None:
        return none
    thr = max(min_dv, k_sigma * noise)
    out_b, out_t, out_dv = [], [], []
    q0 = 0
    for tc, pc, cc, jumps in (kept or _with_jumps(source(), half)):
        dv, mag, ok, c, owner = jumps
        n = tc.shape[0]
        peak = np.empty(mag.size, np.bool_)
        _peaks(mag, ok, owner[half:n - half], half, thr, peak)
        hits = np.flatnonzero(peak)
        kk = hits + half  # sample index of each jump
        dvel = dv[hits]
        # Sub-sample time: where the two lines meet, measured along the jump.
        den = np.einsum("ij,ij->i", dvel, dvel)
        with np.errstate(invalid="ignore", divide="ignore"):
            tk = -np.einsum("ij,ij->i", c[kk] - c[kk - half], dvel) / den
        lo, hi = tc[kk - half], tc[kk + half]
        out_b.append(owner[kk] + q0)
        out_t.append(np.where((den > 0) & (tk >= lo) & (tk <= hi), tk, tc[kk]))
        out_dv.append(dvel)
        q0 += len(cc)
    if not out_b:
        return none
    return np.concatenate(out_b), np.concatenate(out_t), np.concatenate(out_dv)


def _with_jumps(chunks, half):
    """Each chunk ``(t, p, counts)`` with its jumps (:func:`_chunk_jumps`)."""
    for t, p, counts in chunks:
        yield t, p, counts, _chunk_jumps(t, p, counts, half)


def _noise_scale(source, counts, half):
    """The detector's noise scale over the chunks of ``source`` (see
    :func:`detect_events_in`) and, when there is one chunk, that chunk with
    its jumps in a list (else None); ``(None, None)`` when no jump lies
    inside a series."""
    # Jump k is "ok" when both its windows lie inside its body's series:
    # n - 2 half of them in a series of n samples, 3 components each.
    total = 3 * int(np.maximum(counts - 2 * half, 0).sum())
    if total == 0:
        return None, None
    step = total // MAD_SAMPLES if total > MAD_SAMPLES else 1
    picked, seen, chunks, nchunk = [], 0, None, 0
    for chunk in _with_jumps(source(), half):
        dv, _, ok, _, _ = chunk[3]
        comp = dv[ok].ravel()
        # Global component index % step == 0 (a copy: a view would keep the chunk).
        picked.append(comp[(-seen) % step::step].copy())
        seen += comp.size
        nchunk += 1
        chunks = [chunk] if nchunk == 1 else None  # kept only while it is the only one
    comp = np.concatenate(picked)
    return MAD_SCALE * np.median(np.abs(comp - np.median(comp))), chunks


def _chunks(counts, size):
    """``(q0, q1, r0, r1)``: runs of whole series ``[q0, q1)`` (sample rows
    ``[r0, r1)``) of about ``size`` samples each (a longer series alone)."""
    ends = np.cumsum(counts)
    out, q0, r0 = [], 0, 0
    while q0 < len(counts):
        q1 = max(int(np.searchsorted(ends, r0 + size, "right")), q0 + 1)
        r1 = int(ends[q1 - 1])
        out.append((q0, q1, r0, r1))
        q0, r0 = q1, r1
    return out


def _chunk_jumps(t, p, counts, half):
    """The jumps of whole series: ``(dv, mag, ok, c, owner)`` (see :func:`_jumps`
    and :func:`_window_fits`; jump ``i`` is at sample ``i + half``)."""
    m = max(t.shape[0] - 2 * half, 0)
    if m == 0:
        return (np.zeros((0, 3)), np.zeros(0), np.zeros(0, np.bool_), np.zeros((0, 3)),
                np.zeros(0, np.int64))
    v, c, valid, owner = _window_fits(t, p, counts, half)
    dv = np.zeros((m, 3))
    mag = np.zeros(m)
    ok = np.zeros(m, np.bool_)
    if m:
        _jumps(v, valid, half, dv, mag, ok)
    return dv, mag, ok, c, owner


def match_events(det_b, det_t, true_b, true_t, tol):
    """Greedy one-to-one matching by body and nearest time within ``tol``.

    Returns ``(matched detected indices, matched true indices)``; the rest
    are false positives and missed events, counted, never dropped silently.
    """
    used = np.zeros(len(true_t), bool)
    md, mt = [], []
    for i in np.argsort(det_t, kind="stable"):
        cand = np.flatnonzero((true_b == det_b[i]) & ~used & (np.abs(true_t - det_t[i]) <= tol))
        if cand.size:
            j = cand[np.argmin(np.abs(true_t[cand] - det_t[i]))]
            used[j] = True
            md.append(i)
            mt.append(j)
    return np.array(md, int), np.array(mt, int)


def position_noise(t, p, counts, max_samples=MAD_SAMPLES):
    """The positions' noise scale [m] (see the module docstring) over the
    series ``counts`` of samples ``t`` (N,) and positions ``p`` (three (N,)
    arrays, or (N, 3)); None with fewer than 10 equally spaced triplets.
    At most ``max_samples`` evenly strided second differences enter the MAD."""
    t = np.asarray(t, np.float64)
    cols = [np.asarray(c, np.float64) for c in (p.T if isinstance(p, np.ndarray) else
                                                 getattr(p, "cols", p))]
    n = t.shape[0]
    if n < 3:
        return None
    inner = np.ones(n, bool)
    ends = np.cumsum(counts)
    inner[ends - 1] = False
    inner[np.r_[0, ends[:-1]]] = False
    k = np.flatnonzero(inner[1:-1]) + 1
    h0, h1 = t[k] - t[k - 1], t[k + 1] - t[k]
    k = k[(h0 > 0) & (np.abs(h1 - h0) <= 1e-6 * (h0 + h1))]
    if k.size < 10:
        return None
    k = k[::max(1, (3 * k.size) // max_samples)]
    d2 = np.concatenate([c[k + 1] - 2.0 * c[k] + c[k - 1] for c in cols])
    return float(MAD_SCALE * np.median(np.abs(d2 - np.median(d2))) / np.sqrt(6.0))
