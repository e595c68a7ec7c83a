"""Recurrent layers (nn.RNN, nn.LSTM, nn.GRU) as one node of the ATen-level graph.

Traced as they are, their time steps are unrolled: thousands of small ops per layer, which the
lowering would turn into thousands of kernels. Before the capture, each such layer of the
(copied) model gets a forward that calls one custom op, ``mblast.rnn``, whose implementation is
PyTorch's own (torch._VF) and whose node the lowering turns into a loop over the time steps. The
reference outputs never come from here: the importer runs the model as written.
"""

from __future__ import annotations

import types

import torch

_LIB = None
SCHEMA = (
    "rnn(Tensor x, Tensor? h0, Tensor? c0, Tensor[] weights, str mode, int num_layers, bool bidirectional, "
    "bool batch_first, bool has_biases) -> (Tensor, Tensor, Tensor)"
)
MODES = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")


def _sizes(x, weights, num_layers, bidirectional, batch_first):
    d = 2 if bidirectional else 1
    b, t = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    h = weights[1].shape[1]  # weight_hh_l0: [gates * hidden, hidden]
    return d, b, t, h


def _impl(x, h0, c0, weights, mode, num_layers, bidirectional, batch_first, has_biases):
    d, b, _, h = _sizes(x, weights, num_layers, bidirectional, batch_first)
    if h0 is None:
        h0 = x.new_zeros(num_layers * d, b, h)
    if mode == "LSTM":
        if c0 is None:
            c0 = x.new_zeros(num_layers * d, b, h)
        out, hn, cn = torch._VF.lstm(
            x, (h0, c0), weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first
        )
        # Dense outputs, as the lowering lays them out (batch_first output is time-major in torch).
        return out.contiguous(), hn.contiguous(), cn.contiguous()
    fn = {"GRU": torch._VF.gru, "RNN_TANH": torch._VF.rnn_tanh, "RNN_RELU": torch._VF.rnn_relu}[mode]
    out, hn = fn(x, h0, weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
    return out.contiguous(), hn.contiguous(), hn.clone()  # the third output is an LSTM's cell state only


def _meta(x, h0, c0, weights, mode, num_layers, bidirectional, batch_first, has_biases):
    d, b, t, h = _sizes(x, weights, num_layers, bidirectional, batch_first)
    out = x.new_empty((b, t, d * h) if batch_first else (t, b, d * h))
    return out, x.new_empty(num_layers * d, b, h), x.new_empty(num_layers * d, b, h)


def _define() -> bool:
    global _LIB
    if _LIB is not None:
        return True
    try:
        lib = torch.library.Library("mblast", "DEF")
        lib.define(SCHEMA)
        for key in ("CPU", "CUDA"):
            lib.impl("rnn", _impl, key)
        lib.impl("rnn", _meta, "Meta")
    except Exception:
        return False
    _LIB = lib
    return True


def _forward(self, x, hx=None):
    # Only what the op covers; anything else (unbatched input, projections, dropout between
    # layers in training, packed sequences) runs nn's own forward and is traced step by step.
    if (
        not isinstance(x, torch.Tensor)
        or x.dim() != 3
        or getattr(self, "proj_size", 0)
        or (self.dropout and self.training and self.num_layers > 1)
        or self.mode not in MODES
    ):
        return type(self).forward(self, x, hx)
    if self.mode == "LSTM":
        h0, c0 = hx if hx is not None else (None, None)
    else:
        h0, c0 = hx, None
    out, hn, cn = torch.ops.mblast.rnn(
        x, h0, c0, list(self._flat_weights), self.mode, self.num_layers, self.bidirectional, self.batch_first, self.bias
    )
    return (out, (hn, cn)) if self.mode == "LSTM" else (out, hn)


def as_one_op(model) -> int:
    """Gives every recurrent layer of `model` (a copy: it is changed in place) the one-op forward;
    returns how many layers got it (0 when the op cannot be defined in this torch)."""
    layers = [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]
    if not layers or not _define():
        return 0
    for m in layers:
        m.forward = types.MethodType(_forward, m)
    return len(layers)
