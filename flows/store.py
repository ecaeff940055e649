"""The local MLflow store's life: where it is, its locks, its safe first creation.

A local store is a SQLite file (``sqlite:///mlflow.db``, the default).  MLflow
creates and migrates an empty file in place, in many steps, whenever any
client first opens it; a second client opening the same file meanwhile (a
second calibration, ``mlflow ui``, a notebook's ``MlflowClient``) sees half a
schema and either migrates it again ("duplicate column name", alembic's
"expected to match one row ... 0 found") or refuses it ("out-of-date database
schema"), and SQLite may answer "database is locked".  :func:`prepare`
closes that race for every client, ours or not:

1. a store that does not exist yet is built whole beside its final name
   (``.<name>.<pid>.creating``, migrated to MLflow's head revision) and then
   linked into place in one atomic step (``link(2)`` fails when the name
   exists), so no client can ever open a half-built file that we made;
2. a store that exists but is not yet at the head revision is being
   migrated by some other client: we wait (up to the store wait) until its
   revision is the head, or until the file has not changed for
   :data:`SETTLED_S` (an old store that nobody migrates: MLflow then says so
   itself), before opening it.
"""

import contextlib
import fcntl
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import urlparse

#: How long a command waits for a local SQLite store that another process
#: holds locked, or is still creating [s] (``CONTACTFIT_STORE_WAIT_S``;
#: SQLite's own wait, as MLflow opens it, ends after about 20 s with
#: "database is locked").
STORE_WAIT_S = 120.0

#: A store that is not at MLflow's head revision and has not changed for this
#: long [s] is taken as an old store nobody is migrating.
SETTLED_S = 5.0


class StoreLocked(RuntimeError):
    """The local store stayed locked, or unfinished, beyond the wait."""


def wait_s():
    return float(os.environ.get("CONTACTFIT_STORE_WAIT_S", STORE_WAIT_S))


def store_uri(uri):
    """``uri`` with SQLite's busy timeout set to the store wait (a ``sqlite:``
    URI that names no ``timeout`` of its own); other URIs unchanged."""
    if not uri.startswith("sqlite:") or "timeout=" in uri:
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}timeout={wait_s():g}"


def store_file(uri):
    """The file of a local store (``sqlite:`` or a file path), else None."""
    u = urlparse(uri)
    if u.scheme == "sqlite":
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs.db -> "/abs.db"
        return Path(uri[len("sqlite:///"):].split("?", 1)[0]).resolve()
    if u.scheme in ("", "file"):
        return Path(u.path).resolve()
    return None


@contextlib.contextmanager
def store_lock(uri, purpose):
    """Exclusive ``flock`` on ``<store>.<purpose>.lock`` beside a local store
    (``sqlite:`` or a file path), shared by every process on this machine;
    a no-op for a server store (the server serialises its own writes)."""
    path = store_file(uri)
    if path is None:
        yield
        return
    lock = Path(f"{path}.{purpose}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _head():
    # MLflow's private helper (mlflow.store.db.utils): the alembic head its
    # stores verify against.
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


#: :func:`_revision` of a store another connection holds locked.
LOCKED = "locked"


def _revision(path):
    """The store file's alembic revision; None while it has none (empty or
    half-created), :data:`LOCKED` while another connection locks it."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                                timeout=0.5)) as db:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
        return row[0] if row else None
    except sqlite3.OperationalError as exc:
        return LOCKED if "locked" in str(exc) else None
    except sqlite3.Error:
        return None


def _build(path):
    """Create and migrate a store at ``path`` (which must not exist), both
    its tracking and its registry tables, through MLflow itself."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{path}"
    c = MlflowClient(tracking_uri=uri, registry_uri=uri)
    c.search_experiments(max_results=1)
    c.search_registered_models(max_results=1)
    # Release the file (MLflow keeps the stores' engines by URI; nobody uses
    # this name again).  Private attributes: the second MLflow internal here.
    with contextlib.suppress(AttributeError):
        c._tracking_client.store.engine.dispose()
        c._get_registry_client().store.engine.dispose()


def prepare(uri):
    """Make a local SQLite store safe to open: create it whole if it does not
    exist (see the module docstring), then wait until any other client's
    migration of it is done.  Other stores are left to their server."""
    path = store_file(uri) if uri.startswith("sqlite:") else None
    if path is None:
        return
    head = _head()
    if not path.exists():
        with store_lock(uri, "create"):
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
                tmp.unlink(missing_ok=True)
                try:
                    _build(tmp)
                    with contextlib.suppress(FileExistsError):  # another client made it first
                        os.link(tmp, path)
                finally:
                    tmp.unlink(missing_ok=True)
    _await_head(path, head)


def _await_head(path, head):
    deadline = time.monotonic() + wait_s()
    seen, since = None, time.monotonic()
    while (revision := _revision(path)) != head:
        now = time.monotonic()
        stat = path.stat() if path.exists() else None
        mark = (stat.st_size, stat.st_mtime_ns) if stat else None
        if mark != seen:
            seen, since = mark, now
        elif revision != LOCKED and now - since > SETTLED_S and stat and stat.st_size > 0:
            return  # an old store nobody migrates: MLflow says what to do with it
        if now > deadline:
            doing = "stayed locked by" if revision == LOCKED else "was still being created by"
            raise StoreLocked(f"the MLflow store {path} {doing} another process for "
                              f"{wait_s():g} s (CONTACTFIT_STORE_WAIT_S); try again when it "
                              "is done")
        time.sleep(0.1)
