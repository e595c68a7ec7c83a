"""row_sum: y[i] = sum_j x[i, j] for x [2048, 1024] float32."""
import numpy as np

from mblast_data import sample

ROWS, COLS = 2048, 1024


def make_inputs(rng, distribution):
    return {"x": sample(rng, (ROWS, COLS), distribution, "f32")}


def make_params(rng):
    return {}


def reference(inputs, params):
    x = inputs["x"].astype(np.float64)
    return {"y": x.sum(axis=1)}
