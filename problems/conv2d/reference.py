"""conv2d: y = conv(x, weight) + bias, NCHW, x [2,16,32,32], weight [32,16,3,3], stride 1, pad 1."""
import numpy as np

from mblast_data import sample

N, C, H, W = 2, 16, 32, 32
K, R, S = 32, 3, 3
PAD = 1


def make_inputs(rng, distribution):
    return {"x": sample(rng, (N, C, H, W), distribution, "f32")}


def make_params(rng):
    fan_in = C * R * S
    return {
        "weight": sample(rng, (K, C, R, S), "normal", "f32", scale=1.0 / np.sqrt(fan_in)),
        "bias": sample(rng, (K,), "normal", "f32", scale=0.1),
    }


def reference(inputs, params):
    x = inputs["x"].astype(np.float64)
    w = params["weight"].astype(np.float64)
    b = params["bias"].astype(np.float64)
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    p, q = h + 2 * PAD - r + 1, wd + 2 * PAD - s + 1
    xp = np.zeros((n, c, h + 2 * PAD, wd + 2 * PAD))
    xp[:, :, PAD:PAD + h, PAD:PAD + wd] = x
    y = np.zeros((n, k, p, q))
    for dr in range(r):
        for ds in range(s):
            y += np.einsum("kc,nchw->nkhw", w[:, :, dr, ds], xp[:, :, dr:dr + p, ds:ds + q])
    return {"y": y + b[None, :, None, None]}
