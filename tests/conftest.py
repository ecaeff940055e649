"""Fixtures shared by the pipeline and CLI tests."""

import pytest

from flows import settings, tracking


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
