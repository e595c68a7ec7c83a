"""relu: y = max(x, 0) elementwise on a [512, 1024] float32 tensor."""
import numpy as np

from mblast_data import sample

SHAPE = (512, 1024)


def make_inputs(rng, distribution):
    return {"x": sample(rng, SHAPE, distribution, "f32")}


def make_params(rng):
    return {}


def reference(inputs, params):
    x = inputs["x"].astype(np.float64)
    return {"y": np.maximum(x, 0.0)}
