"""vec_add: y = a + b over 1M float32 elements (pure bandwidth)."""
import numpy as np

from mblast_data import sample

N = 1048576


def make_inputs(rng, distribution):
    return {
        "a": sample(rng, (N,), distribution, "f32"),
        "b": sample(rng, (N,), distribution, "f32"),
    }


def make_params(rng):
    return {}


def reference(inputs, params):
    a = inputs["a"].astype(np.float64)
    b = inputs["b"].astype(np.float64)
    return {"y": a + b}
