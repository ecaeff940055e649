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

``registered_model`` is the registry's prefix: each dataset (or each
``model_key`` a calibration config names) has a registered model of its
own, ``<registered_model>-<dataset name>`` (:func:`for_dataset`), with its
own versions and ``champion``, so that no dataset's fit ever competes with,
or starts from, another's.

Calibration options (:class:`CalibrationConfig`) come from a YAML file
(``--config``) whose keys are the field names below; an unknown key or a
value of the wrong kind is an error naming the file and the key.
"""

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from simcore import params as P
from simcore.data.dataset import safe_yaml
from simcore.identify import fit as F
from simcore.identify import losses as L
from simcore.model import integrator_for
from simcore.sliding.integrate import INTEGRATORS

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


def model_name(prefix, key):
    """The registered model of registry ``key`` (a dataset's name, or a
    config's ``model_key``): ``<prefix>-<key>``, the key's characters other
    than letters, digits, ``_``, ``.`` and ``-`` written as ``_``."""
    slug = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.-") else "_"
                   for ch in str(key)).strip("._-") or "dataset"
    return f"{prefix}-{slug}"


def for_dataset(track, key):
    """``track`` with ``registered_model`` the model of registry ``key``
    (:func:`model_name`)."""
    from dataclasses import replace

    return replace(track, registered_model=model_name(track.registered_model, key))


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
            hint = "".join(P.did_you_mean(k, TRACKING_DEFAULTS) for k in unknown)
            raise ValueError(f"{path}: unknown key(s) {unknown}{hint}; expected some of "
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


#: Value types of the config, strict (YAML's ``true`` is no number, ``1.5``
#: no count); their names are the error messages' ("expected int").
Count = StrictInt
Number = StrictInt | StrictFloat


def _want(test, want):
    """A field check: ``test(value)`` must hold, else "expected ``want``"."""
    def check(value):
        if not test(value):
            raise ValueError(f"expected {want}")
        return value
    return AfterValidator(check)


def _finite(low, strict):
    return _want(lambda v: math.isfinite(v) and (v > low if strict else v >= low),
                 f"a finite number {'>' if strict else '>='} {low}")


_AT_LEAST_0 = _want(lambda v: v >= 0, ">= 0")
_AT_LEAST_1 = _want(lambda v: v is None or v >= 1, ">= 1")


#: The fit strategies of a calibration (``strategy``).
STRATEGIES = ("auto", "rollouts", "segments", "search")


class CalibrationConfig(BaseModel):
    """What a calibration fits and how (see :func:`simcore.identify.fit.fit`):
    one typed object, validated once at the edge (:func:`calibration`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # the integrator (a registered name); None: dataset.yaml's, else 002's
    # rule (simcore/choice.py)
    integrator: Annotated[StrictStr | None, _want(lambda v: v is None or v in INTEGRATORS,
                                                  f"one of {list(INTEGRATORS)}")] = None
    # free coefficients; None: all not fixed by the dataset
    fit: Annotated[list | None, _want(lambda v: v is None or len(v) > 0,
                                      "at least one coefficient (without the key: every "
                                      "one the dataset does not fix)")] = None
    start: dict = Field(default_factory=dict)  # initial values (else dataset params, defaults)
    # a grid checked at the fit's answer for coefficients known to their
    # order of magnitude: {name: [values]}; a scanned name that is not free
    # is a model chosen by the training loss
    scan: dict = Field(default_factory=dict)
    method: Annotated[StrictStr, _want(lambda v: v in F.METHODS,
                                       f"one of {list(F.METHODS)}")] = "lm"
    lr: Annotated[Number | None, _want(lambda v: v is None or (math.isfinite(v) and v > 0),
                                       "a finite number > 0")] = None
    ftol: Annotated[Number, _finite(0, False)] = 1e-10
    gtol: Annotated[Number, _finite(0, False)] = 1e-8
    # LM stops when a step is under this many standard errors
    step_sigma: Annotated[Number, _finite(0, False)] = F.STEP_SIGMA
    patience: Annotated[Count, _AT_LEAST_1] = 3
    max_iter: Annotated[Count | None, _AT_LEAST_1] = None  # None: the method's default
    starts: Annotated[Count, _AT_LEAST_1] = 1
    seed: Count = 0
    nuisance: Annotated[StrictStr, _want(lambda v: v in F.NUISANCE,
                                         "none, velocity, push, spin (the spinning model), "
                                         "state or pose (the time-stepper)")] = "none"
    weights: dict = Field(default_factory=dict)
    horizons: list = Field(default_factory=lambda: list(F.HORIZONS))
    secant: list = Field(default_factory=list)  # relative steps; []: exact sensitivities
    # How the fit goes: whole rollouts, or multiple-shooting segments of
    # segment_s seconds from measured states first, or whole rollouts
    # searched at every horizon (search); auto: for tumbling bodies, search
    # when the body's or the recording's own coefficients are free and the
    # data declare no model error, else segments (with their secant and
    # step_sigma defaults); rollouts for the rest.
    strategy: Annotated[StrictStr, _want(lambda v: v in STRATEGIES,
                                         f"one of {list(STRATEGIES)}")] = "auto"
    segment_s: Annotated[Number, _finite(0, True)] = F.SEGMENT_S
    robust: Annotated[Number, _finite(0, False)] = F.ROBUST
    shards: Annotated[Count, _AT_LEAST_0] = 0  # 0: one per worker
    workers: Annotated[Count, _AT_LEAST_1] = 2  # threads of the default task runner
    task_runner: Annotated[StrictStr, _want(lambda v: v in ("threads", "dask"),
                                            "threads or dask")] = "threads"
    dask_address: StrictStr | None = None  # None with dask: a local cluster
    # recalibration test split when the data has none
    test_fraction: Annotated[Number, _want(lambda v: 0 < v < 1, "in (0, 1)")] = 0.25
    # the registry key: fits with the same key share a registered model and
    # its champion (None: the dataset's name)
    model_key: StrictStr | None = None
    # the challenger must beat the champion by this fraction
    promote_margin: Annotated[Number, _want(lambda v: 0 <= v < 1, "in [0, 1)")] = 0.01
    overlays: Annotated[Count, _AT_LEAST_0] = 6  # scenarios drawn in the overlay plot
    # The registration gate: a converged fit is registered only when its
    # training residual rms is at most max(gate_k x the positions' noise
    # scale, gate_floor_m) and its intervals are finite and hold the estimates.
    # At the truth the rms (of a 3-d distance) is about sqrt(3) times the
    # noise scale (per axis). The floor is what data declare beyond the
    # noise (a known model error of real data); by default a micrometre,
    # under which noiseless data agree: the gate follows the noise. gate_k 5
    # lets through fits whose rms is up to about three times the truth's.
    gate_k: Annotated[Number, _finite(0, True)] = 5.0
    gate_floor_m: Annotated[Number, _finite(0, False)] = 1e-6
    # Datasets of measured impacts (simcore/identify/impact_problem.py): the
    # lever [m] of the angular residual (None: each body's radius of gyration,
    # the kinetic-energy metric; 1.0 weighs m/s and rad/s alike), whether each
    # event's residual is taken relative to its measured post-impact
    # velocity, and whether events flagged in the data are fitted too.
    lever_m: Annotated[Number | None, _want(lambda v: v is None or (math.isfinite(v) and v > 0),
                                            "a length > 0 [m] or null")] = None
    relative: StrictBool = False
    use_flagged: StrictBool = False

    def named(self):
        """The coefficients this calibration fits or scans: those a
        problem's layout must hold to carry its answer (a scanned one not
        fitted is held at its grid point)."""
        return [*(self.fit or ()), *self.scan]

    def fit_options(self):
        """Keyword arguments of :func:`simcore.identify.fit.fit` (of a
        config whose strategy is decided: :meth:`chosen`)."""
        return dict(method=self.method, lr=self.lr, ftol=self.ftol, gtol=self.gtol,
                    step_sigma=self.step_sigma, patience=self.patience,
                    max_iter=self.max_iter, starts=self.starts, seed=self.seed,
                    nuisance=self.nuisance, horizons=tuple(self.horizons),
                    robust=self.robust, secant=tuple(self.secant),
                    segments=self.segment_s if self.strategy == "segments" else 0.0,
                    search=F.SEARCH_EVALS if self.strategy == "search" else 0,
                    scan=self.scan)

    def chosen(self, problem):
        """This config with ``strategy: auto`` decided from the data, as the
        integrator is: for ``problem``'s tumbling bodies
        (:meth:`simcore.identify.problem.Problem.tumbling`), ``search`` when
        the fit frees the body's or the recording's own coefficients
        (:attr:`simcore.kernel.parameter.Parameter.named`) and the data
        declare no model error, else ``segments``; ``rollouts`` for the
        rest.  Segments place the contact coefficients well but not the
        body's own (a free segment start absorbs a free fall or a centre of
        mass; from the defaults the segments' gravity lands 3-10 % off on
        synthetic tosses); the first horizons of whole rollouts read them
        from the first impacts, and the search keeps them in the truth's
        narrowing well.  Both take
        :data:`~simcore.identify.fit.SEGMENT_SECANT` and
        :data:`~simcore.identify.fit.SEGMENT_STEP_SIGMA` unless the config
        sets ``secant`` or ``step_sigma``, and ``search`` its horizons
        (:data:`~simcore.identify.fit.SEARCH_HORIZONS`) unless it sets
        ``horizons``.  Data that
        declare a model error (the config sets ``gate_floor_m``, as real
        data do) take the first secant step alone: below the model error a
        finer step resolves the ripples of the misfit, not the truth (on
        the real cube tosses it raised the training loss 11 %); a search
        would chase them too."""
        if self.strategy == "segments" and not problem.tumbling():
            raise ValueError("strategy segments: the data hold no tumbling bodies measured with "
                             "their orientations (boxes on the time-stepper, trajectories qw, "
                             "qx, qy, qz); use strategy rollouts or auto")
        if self.strategy != "auto":
            return self
        if not problem.tumbling():
            return self.model_copy(update={"strategy": "rollouts"})
        declared = "gate_floor_m" in self.model_fields_set
        named = any(P.named(n) for n in self.fit or ())
        update = {"strategy": "search" if named and not declared else "segments"}
        if "secant" not in self.model_fields_set:
            update["secant"] = list(F.SEGMENT_SECANT[:1] if declared else F.SEGMENT_SECANT)
        if "step_sigma" not in self.model_fields_set:
            update["step_sigma"] = F.SEGMENT_STEP_SIGMA
        if update["strategy"] == "search" and "horizons" not in self.model_fields_set:
            update["horizons"] = list(F.SEARCH_HORIZONS)
        return self.model_copy(update=update)

    def as_dict(self):
        """The keys the config sets (so that a config rebuilt from them,
        e.g. in the flow, still tells a default from a choice: :meth:`chosen`)."""
        return self.model_dump(exclude_unset=True)


def _type_names(annotation):
    """``int or NoneType`` for ``StrictInt | None``: the names of the types a
    field takes, for messages."""
    if get_origin(annotation) is Annotated:
        return _type_names(get_args(annotation)[0])
    if get_args(annotation) and get_origin(annotation) not in (list, dict):
        return [n for a in get_args(annotation) for n in _type_names(a)]
    return [getattr(annotation, "__name__", str(annotation))]


def _one_line(exc, given, where):
    """The first error of a :class:`pydantic.ValidationError` as this
    module's one line: ``WHERE: KEY = VALUE: expected ...``."""
    err = exc.errors()[0]
    key = err["loc"][0]
    value = given.get(key, err.get("input"))
    if err["type"] == "value_error":
        want = str(err["ctx"]["error"])
    else:
        names = _type_names(CalibrationConfig.model_fields[key].annotation)
        want = "expected " + " or ".join(dict.fromkeys(names))
    return f"{where}: {key} = {value!r}: {want}"


def calibration(path=None, **overrides):
    """A :class:`CalibrationConfig` from ``path`` (YAML) and keyword overrides
    (``None`` values are ignored), checked: the types and ranges by the
    model, the coefficient names, start values, weights, horizons and secant
    steps against simcore's own rules."""
    given = _read_yaml(path) if path else {}
    where = str(path or "options")
    given.update({k: v for k, v in overrides.items() if v is not None})
    names = set(CalibrationConfig.model_fields)
    unknown = sorted(set(given) - names)
    if unknown:
        hint = "".join(P.did_you_mean(k, names) for k in unknown)
        raise ValueError(f"{where}: unknown key(s) {unknown}{hint}; expected some of "
                         f"{sorted(names)}")
    try:
        cfg = CalibrationConfig.model_validate(given)
    except ValidationError as exc:
        raise ValueError(_one_line(exc, given, where)) from None
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
    try:  # the names against the dataset's model when it is read (check_against)
        F.check_scan(cfg.scan)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
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
    values make a valid vector (``mu_s >= mu_k``), the integrator runs the
    dataset's shapes and laws, the nuisance fits the model.  Raises
    ``ValueError`` naming ``where`` and the key."""
    names = [*cfg.named(), *cfg.start]
    try:
        layout = ds.layout(names)  # with the per-material and held-only-when-named ones
        for n in names:
            layout.index(n)
    except ValueError as exc:
        key = "fit" if cfg.fit and any(n in str(exc) for n in cfg.fit) else \
            "scan" if any(n in str(exc) for n in cfg.scan) else "start"
        raise ValueError(f"{where}: {key}: {exc}") from None
    try:
        layout.vector({**ds.fixed_params, **cfg.start})
    except ValueError as exc:
        raise ValueError(f"{where}: start: {exc}") from None
    if cfg.integrator is not None:
        shapes = set(ds.tables["bodies"]["shape"].to_pylist())
        try:
            integrator_for(shapes, cfg.integrator, layout.laws, ds.spin)
        except ValueError as exc:
            raise ValueError(f"{where}: integrator: {exc}") from None
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
