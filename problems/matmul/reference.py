"""matmul: c = a @ w with a [256, 512] (input) and w [512, 384] (parameter), float32."""
import numpy as np

from mblast_data import sample

M, K, N = 256, 512, 384


def make_inputs(rng, distribution):
    return {"a": sample(rng, (M, K), distribution, "f32")}


def make_params(rng):
    # N(0, 1/K): c stays O(1) for O(1) inputs
    return {"w": sample(rng, (K, N), "normal", "f32", scale=1.0 / np.sqrt(K))}


def reference(inputs, params):
    a = inputs["a"].astype(np.float64)
    w = params["w"].astype(np.float64)
    return {"c": a @ w}
