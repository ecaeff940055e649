"""The registered model: a set of fitted coefficients that simulates datasets.

Logged as an MLflow "model from code" (this file), with the coefficients
the contact laws they were fitted under and the motion model (``model:
{spin: ...}``) in its ``model_config``.  ``predict(df)``: ``df`` has a ``dataset`` column of
dataset directories (the contract of ``datasets/README.md``); each is
simulated with the model's coefficients and laws and the result is the simulated
trajectories at the dataset's sample times, one frame with columns
``dataset, scenario_id, body_id, t, x, y, z, vx, vy, vz``; a dataset of
measured impacts (``kind: impacts``) gives its events' predicted
post-impact velocities, ``dataset, scenario_id, body_id, vx, vy, vz, wx,
wy, wz`` (:func:`simcore.data.impacts.predictions`).
"""

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel


class CoefficientModel(PythonModel):
    def load_context(self, context):
        self.params = dict(context.model_config["params"])
        # The contact laws the coefficients were fitted under (older models: none).
        self.laws = dict(context.model_config.get("laws") or {}) or None
        self.spin = (context.model_config.get("model") or {}).get("spin")

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        from simcore.data import impacts, replay

        if "dataset" not in model_input.columns:
            raise ValueError("predict: expected a 'dataset' column of dataset directories, "
                             f"got columns {list(model_input.columns)}")
        frames = []
        for path in model_input["dataset"]:
            if impacts.is_impacts(path):
                data = impacts.read(path)
                if self.laws:
                    data.laws = dict(data.laws, **{k: v for k, v in self.laws.items()
                                                   if k in ("body_ground", "body_wall")})
                values = dict(data.fixed_params, **self.params)
                df = pd.DataFrame(impacts.predictions(data, impacts.simulate(data, values)))
            else:
                df = pd.DataFrame(replay.simulate_dataset(str(path), self.params, laws=self.laws,
                                                          spin=self.spin)["trajectories"])
            df.insert(0, "dataset", str(path))
            frames.append(df)
        return pd.concat(frames, ignore_index=True)


mlflow.models.set_model(CoefficientModel())
