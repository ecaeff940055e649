"""Settings: MLflow tracking and registry (``mlflow.yml``) and calibration options.

Tracking settings come from the first of ``$CONTACTFIT_MLFLOW_CONFIG``,
``./mlflow.yml`` and the embedded :data:`TRACKING_DEFAULTS`; then the
environment overrides single keys:

=====================  ==============================
key                    environment variable
=====================  ==============================
``tracking_uri``       ``MLFLOW_TRACKING_URI``
``registry_uri``       ``MLFLOW_REGISTRY_URI``
``experiment``         ``CONTACTFIT_EXPERIMENT``
``registered_model``   ``CONTACTFIT_REGISTERED_MODEL``
``champion_alias``     ``CONTACTFIT_CHAMPION_ALIAS``
=====================  ==============================

The default store is a SQLite file ``mlflow.db`` in the working directory
(artifacts under ``./mlruns``), so a fresh machine needs no server.

Calibration options (:class:`CalibrationConfig`) come from a YAML file
(``--config``) whose keys are the field names below; an unknown key or a
value of the wrong kind is an error naming the file and the key.
"""

import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from simcore.identify import fit as F
from simcore.data.dataset import safe_yaml
from simcore.identify import losses as L
from simcore import params as P

TRACKING_DEFAULTS = {
    "tracking_uri": "sqlite:///mlflow.db",
    "registry_uri": None,
    "experiment": "contactfit",
    "registered_model": "contactfit-coefficients",
    "champion_alias": "champion",
}
_ENV = {"tracking_uri": "MLFLOW_TRACKING_URI", "registry_uri": "MLFLOW_REGISTRY_URI",
        "experiment": "CONTACTFIT_EXPERIMENT", "registered_model": "CONTACTFIT_REGISTERED_MODEL",
        "champion_alias": "CONTACTFIT_CHAMPION_ALIAS"}


@dataclass(frozen=True)
class Tracking:
    tracking_uri: str
    registry_uri: str
    experiment: str
    registered_model: str
    champion_alias: str
    source: str = "defaults"


def tracking(path=None):
    """The tracking settings (see the module docstring)."""
    path = path or os.environ.get("CONTACTFIT_MLFLOW_CONFIG")
    if path is None and Path("mlflow.yml").is_file():
        path = "mlflow.yml"
    values = dict(TRACKING_DEFAULTS)
    if path:
        given = _read_yaml(path)
        unknown = sorted(set(given) - set(TRACKING_DEFAULTS))
        if unknown:
            raise ValueError(f"{path}: unknown key(s) {unknown}; expected some of "
                             f"{sorted(TRACKING_DEFAULTS)}")
        values.update({k: v for k, v in given.items()})
    for key, env in _ENV.items():
        if os.environ.get(env):
            values[key] = os.environ[env]
    for key in ("tracking_uri", "experiment", "registered_model", "champion_alias"):
        if not isinstance(values[key], str) or not values[key]:
            raise ValueError(f"{path or 'tracking settings'}: {key} = {values[key]!r}: "
                             "expected a non-empty string")
    values["registry_uri"] = values["registry_uri"] or values["tracking_uri"]
    _check_tracking(values, path)
    return Tracking(**values, source=str(path or "defaults"))


#: Store URI schemes MLflow serves (a bare path is a local file store).
URI_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql",
               "databricks", "")


def _check_tracking(values, path):
    """The URIs' schemes, the alias and the model name, before any flow
    starts (a bad alias found at registration would leave a version behind)."""
    where = path or "tracking settings"
    for key in ("tracking_uri", "registry_uri"):
        scheme = values[key].split(":", 1)[0].split("+", 1)[0] if ":" in values[key] else ""
        if scheme not in URI_SCHEMES:
            raise ValueError(f"{where}: {key} = {values[key]!r}: expected a URI of one of the "
                             f"schemes {[s for s in URI_SCHEMES if s]} or a local path")
    # MLflow's own rules (its checks run only when a version is registered).
    from mlflow.exceptions import MlflowException
    from mlflow.utils import validation as V

    for key, checks in (("champion_alias", (V._validate_model_alias_name,
                                            V._validate_model_alias_name_reserved)),
                        ("registered_model", (V._validate_model_name,))):
        try:
            for check in checks:
                check(values[key])
        except MlflowException as exc:
            raise ValueError(f"{where}: {key} = {values[key]!r}: {exc.message}") from None


@dataclass
class CalibrationConfig:
    """What a calibration fits and how (see :func:`simcore.identify.fit.fit`)."""

    fit: list = None                 # free coefficients; None: all not fixed by the dataset
    start: dict = field(default_factory=dict)   # initial values (else dataset params, defaults)
    method: str = "lm"
    lr: float = None
    ftol: float = 1e-10
    gtol: float = 1e-8
    step_sigma: float = F.STEP_SIGMA  # LM stops when a step is under this many stderr
    patience: int = 3
    max_iter: int = None             # None: the method's default (fit.MAX_ITER)
    starts: int = 1
    seed: int = 0
    nuisance: str = "none"
    weights: dict = field(default_factory=dict)
    horizons: list = field(default_factory=lambda: list(F.HORIZONS))
    secant: list = field(default_factory=list)  # relative steps; []: exact sensitivities
    robust: float = F.ROBUST
    shards: int = 0                  # 0: one per worker
    workers: int = 2                 # threads of the default task runner
    task_runner: str = "threads"     # or "dask"
    dask_address: str = None         # None with dask: a local cluster
    test_fraction: float = 0.25      # recalibration test split when the data has none
    promote_margin: float = 0.01     # challenger must beat the champion by this fraction
    overlays: int = 6                # scenarios drawn in the overlay plot
    # The registration gate: a converged fit is registered only when its
    # training residual rms is at most max(gate_k x the positions' noise
    # scale, gate_floor_m) and its intervals are finite and hold the estimates.
    gate_k: float = 10.0
    gate_floor_m: float = 0.05

    def fit_options(self):
        """Keyword arguments of :func:`simcore.identify.fit.fit`."""
        return dict(method=self.method, lr=self.lr, ftol=self.ftol, gtol=self.gtol,
                    step_sigma=self.step_sigma, patience=self.patience, max_iter=self.max_iter, starts=self.starts,
                    seed=self.seed, nuisance=self.nuisance, horizons=tuple(self.horizons),
                    robust=self.robust, secant=tuple(self.secant))

    def as_dict(self):
        return asdict(self)


_KINDS = {"fit": (list, type(None)), "start": dict, "method": str, "lr": (int, float, type(None)),
          "ftol": (int, float), "gtol": (int, float), "step_sigma": (int, float),
          "patience": int, "max_iter": (int, type(None)),
          "starts": int, "seed": int, "nuisance": str, "weights": dict, "horizons": list,
          "secant": list,
          "robust": (int, float), "shards": int, "workers": int, "task_runner": str,
          "dask_address": (str, type(None)), "test_fraction": (int, float),
          "promote_margin": (int, float), "overlays": int, "gate_k": (int, float),
          "gate_floor_m": (int, float)}


def calibration(path=None, **overrides):
    """A :class:`CalibrationConfig` from ``path`` (YAML) and keyword overrides
    (``None`` values are ignored), checked."""
    given = _read_yaml(path) if path else {}
    where = str(path or "options")
    given.update({k: v for k, v in overrides.items() if v is not None})
    names = {f.name for f in fields(CalibrationConfig)}
    unknown = sorted(set(given) - names)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(names)}")
    for k, v in given.items():
        kind = _KINDS[k]
        if isinstance(v, bool) or not isinstance(v, kind):
            want = kind.__name__ if isinstance(kind, type) else " or ".join(
                t.__name__ for t in kind)
            raise ValueError(f"{where}: {k} = {v!r}: expected {want}")
    cfg = CalibrationConfig(**given)
    for what, names in (("fit", cfg.fit or []), ("start", cfg.start)):
        for n in names:
            try:
                P.parse(n)
            except ValueError as exc:
                raise ValueError(f"{where}: {what}: {exc}") from None
    for n, v in cfg.start.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}: start: {n} = {v!r}: expected a number")
        lo, hi = P.BOUNDS[P.base(n)]
        if not (math.isfinite(v) and lo <= v <= hi):
            raise ValueError(f"{where}: start: {n} = {v!r}: expected {lo} <= {P.base(n)} "
                             f"<= {hi}")
    checks = (("method", cfg.method in F.METHODS, f"one of {list(F.METHODS)}"),
              ("nuisance", cfg.nuisance in F.NUISANCE,
               "none, velocity, push, spin (the spinning model) or state (the time-stepper)"),
              ("task_runner", cfg.task_runner in ("threads", "dask"), "threads or dask"),
              ("shards", cfg.shards >= 0, ">= 0"), ("workers", cfg.workers >= 1, ">= 1"),
              ("test_fraction", 0 < cfg.test_fraction < 1, "in (0, 1)"),
              ("promote_margin", 0 <= cfg.promote_margin < 1, "in [0, 1)"),
              ("overlays", cfg.overlays >= 0, ">= 0"),
              ("gate_k", 0 < cfg.gate_k < float("inf"), "a finite number > 0"),
              ("gate_floor_m", 0 <= cfg.gate_floor_m < float("inf"), "a finite number >= 0"),
              ("lr", cfg.lr is None or (math.isfinite(cfg.lr) and cfg.lr > 0),
               "a finite number > 0"),
              *((key, math.isfinite(getattr(cfg, key)) and getattr(cfg, key) >= 0,
                 "a finite number >= 0") for key in ("ftol", "gtol", "step_sigma", "robust")),
              ("patience", cfg.patience >= 1, ">= 1"),
              ("max_iter", cfg.max_iter is None or cfg.max_iter >= 1, ">= 1"),
              ("starts", cfg.starts >= 1, ">= 1"),
              ("fit", cfg.fit is None or len(cfg.fit) > 0,
               "at least one coefficient (without the key: every one the dataset does not fix)"))
    for key, ok, want in checks:
        if not ok:
            raise ValueError(f"{where}: {key} = {getattr(cfg, key)!r}: expected {want}")
    try:
        L.check_weights(cfg.weights)
    except ValueError as exc:
        raise ValueError(f"{where}: weights: {exc}") from None
    for key, check in (("horizons", F.check_horizons), ("secant", F.check_secant)):
        try:
            check(getattr(cfg, key))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: {key} = {getattr(cfg, key)!r}: {exc}") from None
    return cfg


def check_against(cfg, ds, where):
    """Check a calibration ``cfg`` (:class:`CalibrationConfig`) against the
    dataset ``ds`` it will fit: the coefficients it fits and starts from
    exist in the dataset's model (its laws, spin and materials), the start
    values make a valid vector (``mu_s >= mu_k``), the nuisance fits the
    model.  Raises ``ValueError`` naming ``where`` and the key."""
    names = [*(cfg.fit or []), *cfg.start]
    try:
        layout = ds.layout([n for n in names if "@" in n])
        for n in names:
            layout.index(n)
    except ValueError as exc:
        key = "fit" if cfg.fit and any(n in str(exc) for n in cfg.fit) else "start"
        raise ValueError(f"{where}: {key}: {exc}") from None
    try:
        layout.vector({**ds.fixed_params, **cfg.start})
    except ValueError as exc:
        raise ValueError(f"{where}: start: {exc}") from None
    if cfg.nuisance == "spin" and not ds.spin:
        raise ValueError(f"{where}: nuisance = 'spin': the dataset's model does not spin "
                         "(nuisance 'spin' fits initial spins; add model: {spin: true} to "
                         "dataset.yaml, or use velocity)")


def _read_yaml(path):
    try:
        data = safe_yaml(Path(path))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of keys to values")
    return data
