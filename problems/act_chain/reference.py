"""act_chain: y = tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x, x [512, 1024], scale [1024]."""
import numpy as np

from mblast_data import sample

ROWS, COLS = 512, 1024
SLOPE = 0.1


def make_inputs(rng, distribution):
    return {"x": sample(rng, (ROWS, COLS), distribution, "f32")}


def make_params(rng):
    # per-column gain, N(0, 1): some columns flip sign, some saturate tanh, some are ~linear
    return {"scale": sample(rng, (COLS,), "normal", "f32")}


def reference(inputs, params):
    x = inputs["x"].astype(np.float64)
    scale = params["scale"].astype(np.float64)
    lrelu = np.where(x > 0.0, x, SLOPE * x)
    return {"y": np.tanh(lrelu * scale[None, :]) + 0.5 * x}
