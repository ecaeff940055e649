"""The Prefect server a flow runs on: a configured one, or Prefect's
temporary one started and stopped here, watched while a flow runs; and the
logging and heartbeat settings of a run.

Prefect's private API touched here (checked against prefect 3.9.1, the pinned
version; a Prefect upgrade must re-check each):

* ``prefect.server.api.server.SubprocessASGIServer._instances``: the class's
  registry of the servers this process started (read to find the temporary
  server's process, popped when it is killed);
* ``SubprocessASGIServer._run_uvicorn_command``: overridden to start the
  server's process in a session of its own (a terminal's Ctrl-C reaches
  contactfit, which stops it, not the server);
* ``SubprocessASGIServer.server_process``, ``.running``: the server's process
  and state, killed and cleared at the end;
* ``prefect.logging.handlers.APILogWorker.drain_all`` and
  ``prefect.events.worker.EventsWorker.drain_all``: the logs and events
  Prefect still holds, sent before the server is killed.

Besides the private API: a flow run by the CLI keeps the CLI's SIGINT and
SIGTERM handlers (:func:`kept_signals`, :func:`own_signals`).  Prefect's flow
engine installs a SIGTERM handler of its own for the run, whose exception
first leaves the task runner's context, which waits for the tasks running
in its threads: a shard compiling its kernels on an empty cache held the
exit for a minute.
"""

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time

#: The signal handlers a flow run by the CLI keeps: ``{signum: handler}``.
_KEPT = {}
#: Set (by ``contactfit -v``) to keep every task run's lines and Dask's.
VERBOSE_ENV = "CONTACTFIT_VERBOSE"
#: Prefect's setting of its task-run logger's level (its logging.yml, by the
#: environment; read by every process a task runner starts).
TASK_RUNS_LEVEL_ENV = "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL"


@contextlib.contextmanager
def kept_signals(handlers):
    """Install ``handlers`` (``{signum: handler}``) for the block, and have
    every flow that starts in it install them again over Prefect's own
    (:func:`own_signals`); the previous handlers are restored after."""
    before = {s: signal.signal(s, h) for s, h in handlers.items()}
    _KEPT.update(handlers)
    try:
        yield
    finally:
        _KEPT.clear()
        for s, h in before.items():
            signal.signal(s, h)


def own_signals():
    """At a flow's start: the handlers of :func:`kept_signals`, if any, over
    the SIGTERM handler Prefect's engine has just installed (only the main
    thread can install one; elsewhere nothing changes)."""
    for s, h in _KEPT.items():
        with contextlib.suppress(ValueError):
            signal.signal(s, h)


#: A configured Prefect server that does not answer its health check for this
#: long [s] is taken as lost (a busy server may be slow; a lost one says nothing).
SERVER_GRACE_S = 30.0


@contextlib.contextmanager
def watch_server(on_lost, every=0.5):
    """Call ``on_lost()`` once if the Prefect server stops while the block
    runs: the temporary server's process exits, or a configured server
    (``PREFECT_API_URL``) fails its health check for :data:`SERVER_GRACE_S`.
    Without it Prefect's client retries for minutes and ends in a traceback."""
    if on_lost is None:
        yield
        return
    import urllib.request

    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL

    procs = [s.server_process for s in SubprocessASGIServer._instances.values()
             if s.server_process is not None]
    url = os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()
    stop = threading.Event()

    def alive():
        if procs:
            return all(p.poll() is None for p in procs)
        try:
            urllib.request.urlopen(url.rstrip("/") + "/health", timeout=5)
            return True
        except Exception:
            return False

    def watch():
        last_ok = time.monotonic()
        while not stop.wait(every):
            if alive():
                last_ok = time.monotonic()
            elif procs or time.monotonic() - last_ok > SERVER_GRACE_S:
                on_lost()
                return

    if not (procs or url):
        yield
        return
    thread = threading.Thread(target=watch, name="contactfit-server-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


#: How long the temporary Prefect server may take to start [s] (Prefect's own
#: default, 20 s, is not enough on a busy machine's first run).
SERVER_STARTUP_S = 120.0


@contextlib.contextmanager
def temporary_server():
    """Without a configured Prefect server (``PREFECT_API_URL``), start
    Prefect's temporary one before the flow, with a longer start-up wait
    (:data:`SERVER_STARTUP_S`), in a session of its own: a terminal's Ctrl-C
    reaches contactfit, which stops the server (:func:`stop_temporary_server`),
    instead of the server printing its shutdown traceback.  Prefect's own
    code finds it as its default server, and processes started meanwhile (Dask
    workers) find it through ``PREFECT_API_URL`` in their environment instead
    of each starting a server of its own."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value() or None in SubprocessASGIServer._instances:
        yield
        return

    class Detached(SubprocessASGIServer):
        def _run_uvicorn_command(self):
            popen = subprocess.Popen

            def detached(*args, **kwargs):
                return popen(*args, start_new_session=True, **kwargs)

            subprocess.Popen = detached
            try:
                return super()._run_uvicorn_command()
            finally:
                subprocess.Popen = popen

    server = Detached()
    before = os.environ.get("PREFECT_API_URL")
    try:
        server.start(timeout=SERVER_STARTUP_S)
        os.environ["PREFECT_API_URL"] = server.api_url  # for worker processes only
        yield
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before
        stop_temporary_server(drain=True)


def stop_temporary_server(drain=False):
    """Kill the temporary Prefect servers this process started, at once (a
    graceful stop lets the server's event recorder print a traceback while it
    shuts down; its SQLite store is crash-safe).  ``drain``: first send the
    logs and events Prefect still holds (else its exit handlers report that
    the server is gone)."""
    from prefect.server.api.server import SubprocessASGIServer

    if drain:
        with contextlib.suppress(Exception):
            from prefect.logging.handlers import APILogWorker

            APILogWorker.drain_all(timeout=5)
        with contextlib.suppress(Exception):
            from prefect.events.worker import EventsWorker

            EventsWorker.drain_all(timeout=5)

    for key, server in list(SubprocessASGIServer._instances.items()):
        proc = server.server_process
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
                proc.wait(timeout=5)
            server.server_process = None
        server.running = False
        SubprocessASGIServer._instances.pop(key, None)


@contextlib.contextmanager
def run_settings():
    """Task runs log at WARNING (a line per shard evaluation would drown the
    fit's progress lines) and Dask's cluster too, unless :data:`VERBOSE_ENV`
    is set; on Prefect's temporary server (no
    ``PREFECT_API_URL``) flow runs send no heartbeats: the server ends with
    the process, nothing watches them, and a flow's end waits up to 1 s for
    the heartbeat thread's sleep (``shared/docs/stack-notes.md``).  A
    configured server keeps Prefect's heartbeats (crashed-run detection)."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    verbose = bool(os.environ.get(VERBOSE_ENV))
    set_here = False
    log = logging.getLogger("prefect.task_runs")
    level = log.level
    log.setLevel(level if verbose else max(level, logging.WARNING))
    # A failed flow is reported by the CLI in one line (and its traceback is
    # in the run's error.txt): Prefect's own line keeps its message only.
    flow_log = logging.getLogger("prefect.flow_runs")
    flow_log.addFilter(one_line_failures)
    # The temporary server's start: its address, without a documentation link.
    prefect_log = logging.getLogger("prefect")
    prefect_log.addFilter(address_only)
    # Dask's cluster start and stop log a hundred INFO lines; its worker
    # processes read the level from the environment.
    dask_log = logging.getLogger("distributed")
    dask_level = dask_log.level
    dask_log.setLevel(dask_level if verbose else max(dask_level, logging.WARNING))
    if not verbose:
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
        # Dask's workers run the task runs in processes of their own, which
        # read Prefect's logging from the environment.
        set_here = TASK_RUNS_LEVEL_ENV not in os.environ
        os.environ.setdefault(TASK_RUNS_LEVEL_ENV, "WARNING")
    try:
        if PREFECT_API_URL.value():
            yield
        else:
            with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
                yield
    finally:
        log.setLevel(level)
        dask_log.setLevel(dask_level)
        if set_here:
            os.environ.pop(TASK_RUNS_LEVEL_ENV, None)
        flow_log.removeFilter(one_line_failures)
        prefect_log.removeFilter(address_only)


def address_only(record):
    """Keep the first line of Prefect's "Starting temporary server on URL"
    (its second is a documentation link on every run; a logging filter)."""
    if str(record.msg).startswith("Starting temporary server"):
        record.msg = str(record.msg).split("\n", 1)[0]
        record.args = ()
    return True


def one_line_failures(record):
    """Drop the traceback of Prefect's "Encountered exception during
    execution" line (a logging filter: keeps every record)."""
    if str(record.msg).startswith("Encountered exception during execution"):
        record.exc_info = None
        record.exc_text = None
    return True
