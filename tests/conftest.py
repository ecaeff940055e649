"""Fixtures shared by the pipeline and CLI tests."""

import atexit
import os
import shutil
import tempfile

# Each pytest-xdist worker keeps its own Prefect home (its database and
# storage), so that two workers' ephemeral servers never share one SQLite
# file; set before Prefect is imported, removed when the worker exits.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(
        prefix=f"contactfit-prefect-{os.environ['PYTEST_XDIST_WORKER']}-")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)

import pytest  # noqa: E402

from flows import settings, tracking  # noqa: E402


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite store (artifacts under tmp_path) for each test:
    ``(tracking settings, client, experiment id)``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    track = settings.tracking()
    c, exp = tracking.client(track)
    # mlflow's process-wide URIs too: a command that loads a registered model
    # sets them, and a later test's ``models:/`` URI must mean its own store.
    import mlflow

    mlflow.set_tracking_uri(track.tracking_uri)
    mlflow.set_registry_uri(track.registry_uri)
    return track, c, exp
