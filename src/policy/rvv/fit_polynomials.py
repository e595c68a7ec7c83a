#!/usr/bin/env python3
"""How the polynomial coefficients in rvv_math.cpp were made (run with numpy: .venv/bin/python3).

Each approximation is fitted for minimum maximum *relative* error on its reduced interval with
Lawson's iteratively reweighted least squares (which converges to the minimax fit), on 4000
Chebyshev points, in float64; the printed float32 values are what rvv_math.cpp uses.

  exp / expm1  e^r - 1 - r = r^2 (c2 + c3 r + ... + c6 r^4),  |r| <= ln2 / 2   (degree 6)
               and a degree-5 set for exp only (softmax variants with rtol >= 1e-5)
  log          log(m) = s P(s^2), s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2))
  log1p        log1p(y) = s P(s^2), s = y / (2 + y), y in (0, 1]            (softplus)
  gelu         Phi(-t) = 0.5 erfc(t / sqrt(2)) = exp(-t^2 / 2) u Q(u),  u = 1 / (1 + p t),
               t in [0, 14]; p = 0.265 minimises the error of a degree-9 Q
"""
import math

import numpy as np


def lawson(F, B, iters=300):
    """Coefficients c minimising max |B c - F| (B and F already divided by the target)."""
    w = np.ones(len(F)) / len(F)
    best = None
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(B * sw[:, None], F * sw, rcond=None)
        e = np.abs(B @ c - F)
        if best is None or e.max() < best[1]:
            best = (c, e.max())
        w = w * e
        w /= w.sum()
    return best


def chebyshev_points(a, b, n=4000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def fit_expm1(degree):
    r = chebyshev_points(-math.log(2) / 2, math.log(2) / 2)
    r = r[np.abs(r) > 1e-6]
    t = np.expm1(r)
    B = np.stack([r**k for k in range(2, degree + 1)], 1) / t[:, None]
    return lawson((t - r) / t, B)


def fit_exp(degree):
    r = chebyshev_points(-math.log(2) / 2, math.log(2) / 2)
    t = np.exp(r)
    B = np.stack([r**k for k in range(2, degree + 1)], 1) / t[:, None]
    return lawson((t - 1 - r) / t, B)


def fit_atanh(wmax, degree):
    """2 atanh(s) / s as a polynomial in w = s^2 on (0, wmax]."""
    w = chebyshev_points(1e-12, wmax)
    s = np.sqrt(w)
    F = 2 * np.arctanh(s) / s
    B = np.stack([w**k for k in range(0, degree + 1)], 1) / F[:, None]
    return lawson(np.ones_like(F), B)


def fit_gelu_tail(p, degree, tmax=14.0):
    erfc = np.vectorize(math.erfc)
    u = chebyshev_points(1 / (1 + p * tmax), 1.0, 3000)
    t = (1 / u - 1) / p
    G = 0.5 * erfc(t / math.sqrt(2)) * np.exp(t * t / 2)
    B = np.stack([u**k for k in range(1, degree + 1)], 1) / G[:, None]
    return lawson(np.ones_like(G), B)


def show(name, fit):
    c, err = fit
    print(f"{name}: max relative error {err:.3g}")
    print("   ", ", ".join(repr(float(np.float32(x))) + "f" for x in c))


if __name__ == "__main__":
    show("expm1 / exp, c2..c6", fit_expm1(6))
    show("exp degree 5, c2..c5", fit_exp(5))
    show("log, P(w) w^0..w^3", fit_atanh(((math.sqrt(2) - 1) / (math.sqrt(2) + 1)) ** 2, 3))
    show("log1p, P(w) w^0..w^4", fit_atanh(1 / 9, 4))
    show("gelu tail, Q(u) u^1..u^9, p = 0.265", fit_gelu_tail(0.265, 9))
