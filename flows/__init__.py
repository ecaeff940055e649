"""contactfit's orchestration layer: the command line now, Prefect flows and
MLflow tracking next.  Thin over simcore."""
