"""The model registry: fitted coefficient sets as versions, ``champion`` alias.

Each dataset (or registry key, :func:`flows.settings.for_dataset`) has its
own registered model; the functions here take the settings of that one.

Each successful calibration registers a version holding its coefficients as
a pyfunc model (:mod:`flows.pyfunc_model`); the first version of a name
becomes the champion.  :func:`promote` moves the alias under a lock:

* a local store (``sqlite:`` or a file path): an exclusive ``flock`` on
  ``<store>.champion.lock``, held while the champion is re-read, the
  challenger re-scored against it if it changed, and the alias moved;
* any store: the ``recalibrate`` deployment runs with
  ``concurrency_limit: 1`` (``prefect.yaml``), so scheduled runs queue.

So two recalibrations at once are serialised at the decision: the second
sees the first's result as the champion and must beat that, and the alias
always names a version that won its comparison.
"""

import contextlib
import os
import tempfile
import warnings
from pathlib import Path

import mlflow
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, Schema

from .store import store_lock

MODEL_CODE = Path(__file__).with_name("pyfunc_model.py")
#: ``predict``: a ``dataset`` column of dataset directories in, simulated
#: trajectories out (see :mod:`flows.pyfunc_model`).
SIGNATURE = ModelSignature(
    inputs=Schema([ColSpec("string", "dataset")]),
    outputs=Schema([ColSpec("string", "dataset"), ColSpec("string", "scenario_id"),
                    ColSpec("long", "body_id")]
                   + [ColSpec("double", c) for c in ("t", "x", "y", "z", "vx", "vy", "vz")]))


def uris(settings, version=None):
    """``fit.json``'s registry keys: the dataset's registered model, the URI
    of this fit's version (None until registered) and of its champion."""
    name = settings.registered_model
    return {"registered_model": name,
            "model_uri": f"models:/{name}/{version}" if version else None,
            "champion_uri": f"models:/{name}@{settings.champion_alias}"}


def register(c, settings, run_id, params, tags, laws=None, spin=False):
    """Log the coefficients as the run's ``model`` artifact and register it;
    returns the version (a string).  The first version becomes champion
    (:func:`register_version`)."""
    log_model(c, run_id, params, laws, spin)
    return register_version(c, settings, run_id, tags)[0]


def log_model(c, run_id, params, laws=None, spin=False):
    """Save the coefficients, the contact laws they were fitted under
    (``{kind: name}``) and whether the spheres spin, as a pyfunc model in the
    run's ``model`` artifact (registers nothing)."""
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        # An input example would make MLflow run predict (a whole simulation) at save time.
        warnings.filterwarnings("ignore", message=".*input example was not provided")
        path = os.path.join(d, "model")
        mlflow.pyfunc.save_model(path, python_model=str(MODEL_CODE),
                                 model_config={"params": dict(params),
                                               "laws": dict(laws or {}),
                                               "model": {"spin": bool(spin)}},
                                 signature=SIGNATURE, pip_requirements=["contactfit"])
        c.log_artifacts(run_id, path, "model")


def register_version(c, settings, run_id, tags):
    """Register the run's ``model`` artifact (:func:`log_model`) as a new
    version; returns ``(version, first)``: the version (a string) and whether
    it became the first champion.  That decision is made once, under the
    champion lock, and tagged on the version (``champion: first``)."""
    name = settings.registered_model
    if c.search_registered_models(filter_string=f"name = '{name}'") == []:
        with contextlib.suppress(mlflow.exceptions.MlflowException):
            c.create_registered_model(name)  # another run may have made it meanwhile
    source = f"{c.get_run(run_id).info.artifact_uri}/model"
    mv = c.create_model_version(name, source=source, run_id=run_id,
                                tags={k: str(v) for k, v in tags.items()})
    with champion_lock(settings):
        first = _champion_version(c, settings) is None
        if first:
            c.set_registered_model_alias(name, settings.champion_alias, mv.version)
            c.set_model_version_tag(name, mv.version, "champion", "first")
    return str(mv.version), first


def _champion_version(c, settings):
    try:
        return c.get_model_version_by_alias(settings.registered_model,
                                            settings.champion_alias)
    except mlflow.exceptions.MlflowException:
        return None


def champion(c, settings):
    """``(version, params)`` of the current champion, or None."""
    mv = _champion_version(c, settings)
    if mv is None:
        return None
    model = mlflow.pyfunc.load_model(f"models:/{settings.registered_model}/{mv.version}")
    return str(mv.version), dict(model.model_config["params"])


def set_champion(c, settings, version):
    c.set_registered_model_alias(settings.registered_model, settings.champion_alias, version)


def champion_lock(settings):
    """Exclusive lock for alias decisions on a local registry store (no-op otherwise)."""
    return store_lock(settings.registry_uri, "champion")
