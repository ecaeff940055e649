"""The scheduled recalibration: a deployment of ``recalibrate`` on a cron.

Two ways to run it against a Prefect server (``prefect server start``):

* ``contactfit serve DATASET --cron "0 3 * * *"``: this process registers
  the deployment and runs its scheduled runs (:func:`deployment` +
  ``prefect.serve``);
* ``prefect deploy --all`` with ``prefect.yaml`` (the same deployment, for a
  ``process`` work pool and ``prefect worker start``).

Either way the deployment has ``concurrency_limit: 1``: recalibrations of one
model queue rather than overlap (see :mod:`flows.registry` for the lock that
also covers runs started by hand).
"""

from .pipeline import recalibrate

NAME = "scheduled-recalibration"
DEFAULT_CRON = "0 3 * * *"


def deployment(dataset, cron=DEFAULT_CRON, config=None, name=NAME):
    """The ``recalibrate`` deployment (a ``RunnerDeployment``)."""
    return recalibrate.to_deployment(
        name=name, cron=cron, concurrency_limit=1,
        parameters={"dataset": str(dataset), "config": config},
        description="Recalibrate the contact coefficients on new data; move the champion "
                    "alias only when the challenger wins on the test split.",
        tags=["contactfit"])


def serve(dataset, cron=DEFAULT_CRON, config=None):
    """Register the deployment and run its schedule until interrupted."""
    from prefect import serve as prefect_serve

    prefect_serve(deployment(dataset, cron, config))
