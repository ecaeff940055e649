"""The artifacts of a calibration: ``fit.json``, plots, residual table and an
HTML report that embeds its figures (so it is one self-contained file the
MLflow UI shows inline)."""

import base64
import html
import io
import json

import numpy as np

from simcore.identify import fit as F


def status_word(result):
    """The word of ``result``'s status (:data:`simcore.identify.fit.STATUSES`): the same
    in the terminal, ``fit.json``, the MLflow tags and the report."""
    return F.STATUSES[result.status].word


def digits(value, stderr):
    """Significant digits that show ``value`` down to two digits of its
    standard error (at least 3): ``0.190012 +- 3.2e-05`` and its interval
    ``[0.189949, 0.190075]`` rather than ``0.19 [0.19, 0.19]``."""
    if not (np.isfinite(stderr) and stderr > 0 and np.isfinite(value) and value != 0):
        return 4
    return int(max(3, min(15, np.floor(np.log10(abs(value))) - np.floor(np.log10(stderr)) + 2)))


def estimate(doc, name):
    """``(value, stderr, interval)`` of a free coefficient of ``doc`` as text,
    to :func:`digits` significant digits (``-`` where not identifiable)."""
    v = doc["params"][name]
    se = doc["stderr"].get(name)
    lo, hi = doc["ci95"].get(name) or (None, None)
    if se is None or not np.isfinite(se) or lo is None:
        return f"{v:.4g}", "-", "-"
    k = digits(v, se)
    return f"{v:#.{k}g}", f"{se:.2g}", f"[{lo:#.{k}g}, {hi:#.{k}g}]"


def converged(result):
    """The optimiser converged on every coefficient the data informs (the
    uninformed ones are held at their start and named: ``result.held``)."""
    return F.STATUSES[result.status].converged


def gate(result, rms_m, noise_m, k, floor_m):
    """Whether a fit may be registered: ``(ok, reason, limit_m)``.

    It must have converged on the coefficients the data inform, its training
    residual rms ``rms_m`` must be at most ``limit_m = max(k noise_m,
    floor_m)`` (``noise_m``: the positions' noise scale, None when unknown),
    and every informed coefficient's 95 % interval must be finite and hold
    its estimate.  The limit follows the noise the data show; ``floor_m`` is
    what the data declare beyond it (a known model error of real data, or
    the default micrometre under which noiseless data agree).  A converged
    fit far above the noise did not find the truth: ``reason`` says so, by
    how many times the noise, and what to try."""
    limit = rms_limit(noise_m, k, floor_m)
    if not converged(result):
        return False, f"the fit did not converge: {result.message}", limit
    if above(rms_m, limit):
        finite = sum(bool(np.isfinite(r.loss)) for r in result.starts)
        return False, _above_noise(rms_m, noise_m, k, floor_m, limit,
                                   result.spread.get("agree"), finite), limit
    ok, reason = intervals_hold(result)
    return ok, reason, limit


def rms_limit(noise_m, k, floor_m):
    """The gate's limit on the training rms [m]: ``max(k noise_m, floor_m)``
    (``floor_m`` alone when the noise is unknown)."""
    return max(k * noise_m, floor_m) if noise_m is not None else floor_m


def at_noise(limit_m, weights):
    """``enough`` of :func:`simcore.identify.fit.fit`: a fit's trajectory
    residual (the rms over scenarios of each one's rms 3-d distance, from its
    weighted ``trajectory`` component) over ``limit_m`` (at most 1: at the
    noise; ``inf`` when the fit has no trajectory residual)."""
    w = float(weights.get("trajectory", 0.0))

    def enough(result):
        value = result.components.get("trajectory")
        if not w > 0 or value is None:
            return np.inf
        rms = float(np.sqrt(value / w))
        return rms / limit_m if np.isfinite(rms) else np.inf
    return enough


def against_noise(rms_m, noise_m):
    """The training residual ``rms_m`` beside the noise, in words a reader
    cannot misread: the rms is of a 3-d distance, so at the noise it is
    sqrt(3) times the per-axis noise scale ``noise_m``."""
    if noise_m is None or not noise_m > 0:
        return "the positions' noise is unknown"
    at = np.sqrt(3.0) * noise_m
    return (f"at the noise it would be {at * 1e3:.3g} mm (sqrt(3) x the positions' noise "
            f"{noise_m * 1e3:.3g} mm per axis: a 3-d distance), the training rms is "
            f"{rms_m / at:.3g} times that")


def intervals_hold(result):
    """``(ok, reason)``: every informed coefficient's 95 % interval is finite
    and holds its estimate."""
    for name in result.free:
        if name in result.held:
            continue
        v = result.params[name]
        lo, hi = result.ci95.get(name, (np.nan, np.nan))
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= v <= hi):
            return False, (f"the 95 % interval of {name} [{lo:.4g}, {hi:.4g}] is not finite "
                           f"or does not hold its estimate {v:.4g}")
    return True, ""


#: The status word of a fit whose optimiser stopped above the gate's limit
#: (in ``fit.json``, the run's tags and the report instead of "converged_*").
ABOVE_NOISE = "above_noise"


#: A training residual over this many times the truth's (``sqrt(3)`` times
#: the positions' noise per axis: a 3-d distance) is above the noise.
ABOVE_TRUTH = 1.5


def beyond_noise(rms_m, noise_m, gate_k=np.inf):
    """The training residual ``rms_m`` is unknown, over :data:`ABOVE_TRUTH`
    times what the noise ``noise_m`` alone leaves at the truth, or over the
    gate's ``gate_k`` times the noise: a misfit moves each scenario's
    residuals together, and the plain errors, which take them as
    independent, understate the real ones
    (:func:`simcore.identify.fit.widened`).  A chaotic toss's well around
    the truth is narrower than a fit can place it, so a fit can end beside
    it, under the gate, with plain intervals that miss the truth."""
    return above(rms_m, min(ABOVE_TRUTH * np.sqrt(3.0), gate_k) * noise_m)


def above(rms_m, limit_m):
    """The training residual ``rms_m`` is unknown or above ``limit_m``."""
    return rms_m is None or not np.isfinite(rms_m) or rms_m > limit_m


def _above_noise(rms_m, noise_m, k, floor_m, limit, agree=None, finite=0):
    """The verdict on a converged fit whose residual is above the gate; a
    multi-start (``agree`` of its ``finite`` starts reached the best loss)
    says which of the two causes is likelier."""
    rms = f"{rms_m:.4g} m" if rms_m is not None else "unknown"
    if noise_m is not None and noise_m > 0 and rms_m is not None and np.isfinite(rms_m):
        times = f", {rms_m / noise_m:.3g} times the positions' noise {noise_m:.3g} m"
    else:
        times = f" (the positions' noise: {'unknown' if noise_m is None else f'{noise_m:.3g} m'})"
    if finite > 1 and agree is not None and agree < finite:
        cause = (f"Only {agree} of {finite} starts reached this loss: the fit likely stopped in "
                 "a local minimum. Try more starts, fewer coefficients at once, or other start "
                 "values")
    elif finite > 1:
        cause = (f"All {finite} starts reached this minimum: the model likely does not explain "
                 "these data. Check dataset.yaml's units, the scenarios and the laws")
    else:
        cause = ("Either the fit stopped in a local minimum, or the model does not explain "
                 "these data. Try several starts (starts: 8), fewer coefficients at once, or "
                 "other start values; check dataset.yaml's units, the scenarios and the laws")
    return (f"not at the noise: the optimiser stopped, but the training residual rms {rms}"
            f"{times}, is above the gate max(gate_k {k:g} x noise, gate_floor_m {floor_m:g} m)"
            f" = {limit:.4g} m. {cause}; if the data carry a known model error, declare it "
            "with gate_floor_m")


#: Correlations of fitted coefficients reported from this size up (lmfit's default).
CORRELATION_MIN = 0.5


def correlations(result, threshold=CORRELATION_MIN):
    """The pairs of informed free coefficients whose estimates correlate by
    ``|r| >= threshold``, strongest first: ``[{"a", "b", "r"}]``."""
    names = list(result.free)
    corr = np.asarray(result.corr, dtype=float)
    out = []
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            r = corr[i, j] if corr.shape == (len(names), len(names)) else np.nan
            if a not in result.held and names[j] not in result.held and np.isfinite(r) \
                    and abs(r) >= threshold:
                out.append({"a": a, "b": names[j], "r": float(r)})
    return sorted(out, key=lambda c: -abs(c["r"]))


def correlation_table(result, matrix):
    """A correlation matrix of the free coefficients as ``{a: {b: r}}``
    over the informed ones (None where unknown; None without a matrix)."""
    if matrix is None:
        return None
    names = list(result.free)
    corr = np.asarray(matrix, dtype=float)
    if corr.shape != (len(names), len(names)):
        return None
    keep = [i for i, n in enumerate(names) if n not in result.held]
    return {names[i]: {names[j]: (float(corr[i, j]) if np.isfinite(corr[i, j]) else None)
                       for j in keep} for i in keep}


def spread(result):
    """A multi-start's spread beside the intervals (None for one start):
    ``starts``, ``finite`` (those that could be simulated), ``agree`` (those
    within 1e-6 of the best loss) and per free coefficient the ``min``,
    ``max`` and ``std`` over the finite starts' estimates."""
    if not result.starts:
        return None
    per = {n: v for n, v in result.spread.items() if n != "agree"}
    return {"starts": len(result.starts),
            "finite": sum(bool(np.isfinite(r.loss)) for r in result.starts),
            "agree": int(result.spread.get("agree", 0)), "params": per}


def fit_json(result, run_id, version, scores, dataset, start=None, truth=None):
    """The ``fit.json`` document of a calibration (``start``: the start values
    of the free coefficients; ``truth``: the dataset's true values, when it
    has them)."""
    return {
        "params": result.params,
        "free": list(result.free),
        "stderr": result.stderr,
        "stderr_cluster": result.stderr_cluster,
        "ci95": {k: list(v) for k, v in result.ci95.items()},
        "interval": result.interval,
        "loss": result.loss,
        "components": result.components,
        "iterations": result.nit,
        "evaluations": result.nfev,
        "converged": converged(result),
        "status": status_word(result),
        "held": list(result.held),
        "message": result.message,
        "start": {n: float(v) for n, v in (start or {}).items() if n in result.free},
        "truth": {n: float(v) for n, v in (truth or {}).items() if n in result.params},
        "correlations": correlations(result),
        "corr": correlation_table(result, result.corr),
        "corr_cluster": correlation_table(result, result.corr_cluster),
        "identifiability": result.identifiability,
        "method": result.method,
        "strategy": result.strategy,
        "spread": spread(result),
        "scores": scores,
        "dataset": dataset,
        "mlflow_run_id": run_id,
        "model_version": version,
    }


def nuisance_table(result, problem, kind):
    """The fitted nuisance values as columns, one row per real value (not the
    padding of smaller scenarios): ``scenario_id``; ``index``, the body id
    (``kind="velocity"``, ``"spin"``, ``"state"``, ``"pose"``: initial
    velocity and spin, and for ``pose`` position and turn) or the scenario's
    control window in file order (``"push"``: its force); ``component`` x or
    y (vx, vy, wx, wy, wz for ``spin``; vx, vy, vz, wx, wy, wz for
    ``state``, then x, y, z, rx, ry, rz for ``pose``); ``value`` (m/s,
    rad/s, N, m or rad); ``stderr`` (NaN where held); ``held`` (the data do
    not depend on it)."""
    s, j = np.nonzero(problem.nuisance_mask(kind))
    slots, comps = problem.nuisance_columns(kind)
    slot = slots[j]
    index = ([int(problem.body_ids[a][b]) for a, b in zip(s, slot)]
             if kind in ("velocity", "spin", "state", "pose") and problem.body_ids
             else slot.tolist())
    se = result.nuisance_stderr[s, j]
    return {"scenario_id": [problem.ids[a] for a in s], "index": np.asarray(index, np.int64),
            "component": list(comps[j]), "value": result.nuisance[s, j],
            "stderr": np.where(np.isfinite(se), se, np.nan), "held": result.nuisance_held[s, j]}


def dumps(doc):
    def clean(x):
        if isinstance(x, float) and not np.isfinite(x):
            return None  # JSON has no inf or NaN
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, np.generic):
            return clean(x.item())
        return x
    return json.dumps(clean(doc), indent=2, sort_keys=True)


def _figure(**kw):
    """A figure of its own (no pyplot state): the plots may be drawn in a
    worker thread while the flow goes on."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def stages(history):
    """The fit's stages in its iteration records: ``(first, last, label)`` of
    each run of iterations on one objective (the segments or the rollouts,
    a horizon, robust or not, a secant step), in order."""
    out = []
    for h in history:
        key = (h["part"], h["horizon"], h["robust"], h["secant"])
        if out and out[-1][3] == key:
            out[-1][1] = h["iter"]
            continue
        part, horizon, robust, secant = key
        label = (f"{part}" + (f", {horizon:g} of the span" if horizon < 1.0 else "")
                 + (", robust" if robust else "") + (f", secant {secant:g}" if secant else ""))
        out.append([h["iter"], h["iter"], label, key])
    return [(a, b, label) for a, b, label, _ in out]


def convergence_png(result):
    """Loss (log scale) and each coefficient, relative to its final value, over
    the iterations; each stage (another objective: the segments or the
    rollouts, a horizon, a secant step) shaded in turn and labelled, so that
    the loss's jumps between stages read as what they are."""
    fig = _figure(figsize=(11, 4.2))
    a, b = fig.subplots(1, 2)
    it = [h["iter"] for h in result.history]
    a.semilogy(it, [h["loss"] for h in result.history], "k.-")
    a.set_xlabel("iteration")
    a.set_ylabel("loss")
    a.set_title("loss (each stage its own objective)")
    for k, (first, last, label) in enumerate(stages(result.history)):
        for ax in (a, b):
            if k % 2:
                ax.axvspan(first - 0.5, last + 0.5, color="0.92", lw=0)
            if k:
                ax.axvline(first - 0.5, color="0.55", lw=0.7, ls=":")
        a.text(first - 0.3, 1.0, label, transform=a.get_xaxis_transform(), rotation=90,
               va="top", ha="left", fontsize=6, color="0.35")
    markers = "o^sDvP*Xh<>"
    for k, n in enumerate(result.free):
        final = result.params[n]
        vals = [h["theta"][n] / final if final else h["theta"][n] for h in result.history]
        b.plot(it, vals, "-", marker=markers[(k // 10) % len(markers)], ms=3,
               color=f"C{k % 10}", label=n)
    b.axhline(1.0, color="0.6", lw=0.8)
    b.set_xlabel("iteration")
    b.set_ylabel("theta / final")
    b.set_title("coefficients")
    b.legend(fontsize=7, ncol=2)
    return _png(fig)


def overlays_png(measured, simulated, scenario_ids):
    """Per scenario, the measured (dots) and simulated (lines) x-y paths, one
    colour per body, and below them each body's x-y residual over time, or,
    for bodies with measured orientations (``tilt`` not NaN: tossed boxes),
    their height and tilt over time, measured and simulated.
    ``measured``/``simulated``: column dicts with scenario_id, body_id, t, x,
    y (z, tilt), their rows aligned (the simulation sampled at the measured
    times)."""
    from matplotlib.lines import Line2D

    n = max(len(scenario_ids), 1)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = _figure(figsize=(3.8 * cols, 5.6 * rows), layout="constrained")
    axes = fig.subplots(2 * rows, cols, squeeze=False,
                        gridspec_kw={"height_ratios": [2.2, 1.0] * rows})
    m_sid = np.asarray(measured["scenario_id"], dtype=object)
    col = {k: (np.asarray(measured[k]), np.asarray(simulated[k]))
           for k in ("body_id", "t", "x", "y", "z", "tilt") if k in measured}
    turned = residual = False  # what the lower panels show
    bodies = 0
    for k, sid in enumerate(scenario_ids):
        path_ax, res_ax = axes[2 * (k // cols), k % cols], axes[2 * (k // cols) + 1, k % cols]
        here = np.flatnonzero(m_sid == sid)
        for c, b in enumerate(np.unique(col["body_id"][0][here])):
            bodies = max(bodies, c + 1)
            r = here[col["body_id"][0][here] == b]
            r = r[np.argsort(col["t"][0][r])]
            (mx, sx), (my, sy) = ((col[a][0][r], col[a][1][r]) for a in ("x", "y"))
            path_ax.plot(mx, my, ".", ms=2.5, color=f"C{c}", alpha=0.45)
            path_ax.plot(sx, sy, "-", lw=1.3, color=f"C{c}")
            t = col["t"][0][r]
            if "tilt" in col and np.isfinite(col["tilt"][0][r]).any():
                (mz, sz), (mt, st) = ((col[a][0][r], col[a][1][r]) for a in ("z", "tilt"))
                res_ax.plot(t, 1e3 * mz, ".", ms=2.5, color=f"C{c}", alpha=0.45)
                res_ax.plot(t, 1e3 * sz, "-", lw=1.0, color=f"C{c}")
                turn_ax = res_ax.twinx()
                turn_ax.plot(t, np.degrees(mt), ".", ms=2.0, color="0.5", alpha=0.45)
                turn_ax.plot(t, np.degrees(st), "--", lw=0.9, color="0.4")
                turn_ax.set_ylabel("tilt [deg] (grey)", fontsize=8)
                turn_ax.tick_params(labelsize=7)
                res_ax.set_ylabel("height [mm]", fontsize=8)
                turned = True
            else:
                residual = True
                res_ax.plot(t, 1e3 * np.hypot(sx - mx, sy - my), lw=1.0,
                            color=f"C{c}", label=f"body {b}")
                res_ax.set_ylabel("x-y residual [mm]", fontsize=8)
        path_ax.set_title(sid, fontsize=9)
        path_ax.set_aspect("equal", adjustable="datalim")
        path_ax.set_xlabel("x [m]", fontsize=8)
        path_ax.set_ylabel("y [m]", fontsize=8)
        res_ax.set_xlabel("t [s]", fontsize=8)
        for ax in (path_ax, res_ax):
            ax.tick_params(labelsize=7)
    for k in range(len(scenario_ids), rows * cols):
        axes[2 * (k // cols), k % cols].axis("off")
        axes[2 * (k // cols) + 1, k % cols].axis("off")
    fig.legend(handles=[Line2D([], [], ls="", marker=".", color="0.3", label="measured"),
                        Line2D([], [], color="0.3", label="simulated")]
               + [Line2D([], [], color=f"C{c}", lw=3, label=f"body {c + 1} of a scene")
                  for c in range(bodies if bodies > 1 else 0)],
               loc="upper right", fontsize=8, title="colour: body (by id order)",
               title_fontsize=8)
    below = " and ".join(w for w, on in (("the x-y residual", residual),
                                         ("height and tilt", turned)) if on)
    fig.suptitle(f"measured and simulated paths, and {below or 'the residual'} over time",
                 fontsize=10)
    return _png(fig)


def report_html(doc, convergence, overlays):
    """One self-contained HTML page: coefficients with intervals,
    identifiability, scores, the loss curve and the overlays."""
    e = html.escape
    rows = []
    start, truth = doc.get("start", {}), doc.get("truth", {})
    for n, v in doc["params"].items():
        free = n in doc["free"]
        ident = doc["identifiability"].get(n, {})
        val, se, ci = estimate(doc, n) if free else (f"{v:.6g}", "-", "-")
        note = e(ident.get("reason", "fixed")) if free else "fixed"
        s0 = f"{start[n]:.6g}" if n in start else "-"
        t0 = f"{truth[n]:.6g}" if n in truth else "-"
        cl = (doc.get("stderr_cluster") or {}).get(n) if free else None
        cl = f"{cl:.2g}" if cl is not None and np.isfinite(cl) else "-"
        rows.append(f"<tr><td>{e(n)}</td><td>{val}</td><td>{se}</td><td>{ci}</td><td>{cl}</td>"
                    f"<td>{s0}</td><td>{t0}</td><td>{note}</td></tr>")
    corr = "".join(f"<tr><td>{e(c['a'])}</td><td>{e(c['b'])}</td><td>{c['r']:+.3f}</td></tr>"
                   for c in doc.get("correlations", [])) or \
        f"<tr><td colspan=3>none above {CORRELATION_MIN}</td></tr>"
    scores = "".join(f"<tr><td>{e(k)}</td><td>{v:.6g}</td></tr>"
                     for k, v in doc["scores"].items() if isinstance(v, (int, float)))
    img = "<img alt='{}' src='data:image/png;base64,{}'/>"
    rms, sigma = doc["scores"].get("train_rms_m"), doc.get("noise_m")
    noise = (f"; residual rms {rms * 1e3:.3g} mm: {against_noise(rms, sigma)}"
             if rms is not None else "")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>contactfit calibration</title>
<style>body{{font-family:sans-serif;margin:1.5em;max-width:72em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px}}
th{{background:#f3f3f3}}img{{max-width:100%}}</style></head><body>
<h1>contactfit calibration: {e(str(doc['dataset'].get('name', '')))}</h1>
<p><b>{e(doc['status'])}</b>: {e(doc['message'])}<br>
method {e(doc['method'])}, {doc['iterations']} iterations, {doc['evaluations']} evaluations,
loss {doc['loss']:.6g} (a mean squared residual per term: m&sup2; for positions,
(m/s)&sup2; for velocities, weighted){noise};
MLflow run {e(str(doc['mlflow_run_id']))},
model version {e(str(doc['model_version']))}</p>
<h2>Coefficients</h2>
<table><tr><th>name</th><th>value</th><th>stderr</th><th>95 % interval</th>
<th>stderr, clustered by scenario</th><th>start</th><th>truth</th><th>identifiability</th></tr>{''.join(rows)}</table>
<p>How: {e(str(doc.get('strategy', '')))}. Intervals: {e(str(doc.get('interval', '')))}.</p>
<h2>Correlations of the estimates (|r| &ge; {CORRELATION_MIN})</h2>
<table><tr><th>a</th><th>b</th><th>r</th></tr>{corr}</table>
<h2>Scores</h2><table>{scores}</table>
<h2>Convergence</h2>{img.format('convergence', base64.b64encode(convergence).decode())}
<h2>Measured and simulated paths</h2>{img.format('overlays', base64.b64encode(overlays).decode())}
</body></html>
"""
