# A stack of the three recurrent layers in the layouts KernelBench's files leave out: a
# bidirectional two-layer GRU (time-major), an LSTM without biases over its output (batch first,
# h0 and c0 given), and a ReLU RNN; every final state is an output too. Written for the lowering
# pipeline's loop construct (tests/lower/CMakeLists.txt), in KernelBench's format.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2, bidirectional=True)
        self.lstm = nn.LSTM(2 * hidden, hidden, batch_first=True, bias=False)
        self.rnn = nn.RNN(hidden, hidden, nonlinearity="relu")

    def forward(self, x, h0, c0):
        y, hg = self.gru(x)  # x: [steps, batch, features]
        z, (hl, cl) = self.lstm(y.transpose(0, 1), (h0, c0))
        r, hr = self.rnn(z.transpose(0, 1))
        return r, hg, hl + cl, hr


steps = 12
batch = 3
features = 10
hidden = 16


def get_inputs():
    return [torch.randn(steps, batch, features), torch.randn(1, batch, hidden), torch.randn(1, batch, hidden)]


def get_init_inputs():
    return [features, hidden]
