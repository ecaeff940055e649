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
    return track, c, exp
