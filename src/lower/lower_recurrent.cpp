// Recurrent layers: `mblast.rnn` (tools/kernelbench/recurrent.py puts an nn.RNN / LSTM / GRU
// stack into the graph as this one node) lowered as one loop per layer and direction. Per layer:
// the input projection of every step at once (a contraction over the layer's input), then a
// loop over the steps whose two kernels compute the recurrent projection from the state of the
// step before and the new state from both (an LSTM's state holds h and c). Outputs, h_n and c_n
// read the states. The gate order and equations are PyTorch's (nn.LSTM, nn.GRU, nn.RNN docs).
#include <fmt/format.h>

#include "lowering.h"

namespace mblast::lower {

namespace {

E sig(const E& x) { return binary("div", fconst(1), binary("add", fconst(1), unary("exp", unary("neg", x)))); }
E fadd(const E& a, const E& b) { return binary("add", a, b); }
E fmul(const E& a, const E& b) { return binary("mul", a, b); }
E ieq(const E& a, int64_t v) { return binary("eq", a, iconst(v)); }

Val lower_rnn(Ctx& c) {
  Program& p = c.p;
  const int x = c.tensor_arg(0);
  const Val h0 = c.arg(1), c0 = c.arg(2), w = c.arg(3);
  const auto& mode_arg = c.raw(4);
  if (!mode_arg.is_string()) throw Unsupported("the recurrent layer's mode is not a string");
  const std::string mode = mode_arg.get<std::string>();
  const int64_t layers = c.int_arg(5, nullptr, 1);
  const bool bi = c.bool_arg(6, nullptr, false), batch_first = c.bool_arg(7, nullptr, false),
             bias = c.bool_arg(8, nullptr, true);
  const int64_t gates = mode == "LSTM" ? 4 : mode == "GRU" ? 3 : (mode == "RNN_TANH" || mode == "RNN_RELU") ? 1 : 0;
  if (gates == 0) throw Unsupported("recurrent mode " + mode);
  const int64_t dirs = bi ? 2 : 1;
  const size_t per = bias ? 4 : 2;  // weight_ih, weight_hh[, bias_ih, bias_hh] per layer and direction
  if (layers < 1 || w.kind != Val::Kind::List || w.items.size() != per * static_cast<size_t>(layers * dirs))
    throw Unsupported("the recurrent layer's weights are not " + std::to_string(per) + " per layer and direction");
  auto weight = [&](int64_t l, int64_t d, size_t k) {
    const Val& v = w.items[static_cast<size_t>(l * dirs + d) * per + k];
    if (v.kind != Val::Kind::Tensor) throw Unsupported("a recurrent weight is not a tensor");
    return v.t;
  };
  const auto xs = c.T(x).shape;
  if (xs.size() != 3) throw Unsupported("a recurrent layer's input of rank other than 3");
  if (c.T(x).dtype != DType::F32) throw Unsupported("a recurrent layer's input that is not f32");
  const int64_t steps = batch_first ? xs[1] : xs[0], batch = batch_first ? xs[0] : xs[1];
  const auto whh_shape = c.T(weight(0, 0, 1)).shape;
  if (whh_shape.size() != 2) throw Unsupported("weight_hh of rank other than 2");
  const int64_t hid = whh_shape[1], g_all = gates * hid;
  if (whh_shape[0] != g_all) throw Unsupported("weight_hh's rows are not gates x hidden");
  const int64_t parts = mode == "LSTM" ? 2 : 1;  // the state: h, and an LSTM's c
  const DType f = DType::F32;
  auto init = [&](const Val& v, int64_t q, const E& b, const E& j) -> E {
    return v.kind == Val::Kind::Tensor ? load(v.t, {iconst(q), b, j}, f) : fconst(0);
  };

  std::vector<int> state(static_cast<size_t>(layers * dirs), -1);
  for (int64_t l = 0; l < layers; ++l) {
    // The layer's input at (step t, batch b, feature i): x, or the layer below's h of both directions.
    auto in_at = [&](const E& t, const E& b, const E& i) -> E {
      if (l == 0) return batch_first ? load(x, {b, t, i}, f) : load(x, {t, b, i}, f);
      const int fw = state[static_cast<size_t>((l - 1) * dirs)];
      if (dirs == 1) return load(fw, {t, b, iconst(0), i}, f);
      const int bw = state[static_cast<size_t>((l - 1) * dirs + 1)];
      const E low = lt(i, iconst(hid));
      return select(low, load(fw, {t, b, iconst(0), select(low, i, iconst(0))}, f),
                    load(bw, {t, b, iconst(0), select(low, iconst(0), sub(i, iconst(hid)))}, f));
    };
    const int64_t in_features = l == 0 ? xs[2] : dirs * hid;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string tag = fmt::format("_l{}{}", l, d ? "r" : "");
      const int wih = weight(l, d, 0), whh = weight(l, d, 1);
      const int64_t q = l * dirs + d;  // the layer-direction's row of h0, c0, h_n, c_n
      // Every step's input projection at once: xw[t, b, g] = sum_i in[t, b, i] * W_ih[g, i].
      const int xw =
          c.compute({steps, batch, g_all}, f, fmul(in_at(var(0), var(1), var(3)), load(wih, {var(2), var(3)}, f)),
                    ReduceOp::Sum, {in_features}, tag + "_x");
      const int loop = static_cast<int>(p.loops.size());
      p.loops.push_back({steps, d == 1});
      const E t = var(0), b = var(1);
      // The step before in the loop's order (t - 1 forward, t + 1 backward); at the first, h0 / c0.
      const E has_prev = d == 0 ? ge(t, iconst(1)) : lt(t, iconst(steps - 1));
      const E prev = select(has_prev, d == 0 ? sub(t, iconst(1)) : add(t, iconst(1)), iconst(0));
      const int gh_id = static_cast<int>(p.tensors.size()), st_id = gh_id + 1;  // created next, in this order
      auto h_prev = [&](const E& bb, const E& j) {
        return select(has_prev, load(st_id, {prev, bb, iconst(0), j}, f), init(h0, q, bb, j));
      };
      // The recurrent projection of this step: gh[t, b, g] = sum_k h_prev[b, k] * W_hh[g, k].
      const int gh = c.compute({steps, batch, g_all}, f, fmul(h_prev(var(1), var(3)), load(whh, {var(2), var(3)}, f)),
                               ReduceOp::Sum, {hid}, tag + "_h");
      p.tensors[static_cast<size_t>(gh)].loop = loop;
      const E j = var(3);
      auto from_x = [&](int64_t g) {
        E v = load(xw, {t, b, add(iconst(g * hid), j)}, f);
        return bias ? fadd(v, load(weight(l, d, 2), {add(iconst(g * hid), j)}, f)) : v;
      };
      auto from_h = [&](int64_t g) {
        E v = load(gh, {t, b, add(iconst(g * hid), j)}, f);
        return bias ? fadd(v, load(weight(l, d, 3), {add(iconst(g * hid), j)}, f)) : v;
      };
      E body;
      if (mode == "LSTM") {  // gates i, f, g, o
        const E ig = sig(fadd(from_x(0), from_h(0))), fg = sig(fadd(from_x(1), from_h(1)));
        const E gg = unary("tanh", fadd(from_x(2), from_h(2))), og = sig(fadd(from_x(3), from_h(3)));
        const E c_prev = select(has_prev, load(st_id, {prev, b, iconst(1), j}, f), init(c0, q, b, j));
        const E c_new = fadd(fmul(fg, c_prev), fmul(ig, gg));
        body = select(ieq(var(2), 0), fmul(og, unary("tanh", c_new)), c_new);
      } else if (mode == "GRU") {  // gates r, z, n
        const E r = sig(fadd(from_x(0), from_h(0))), z = sig(fadd(from_x(1), from_h(1)));
        const E n = unary("tanh", fadd(from_x(2), fmul(r, from_h(2))));
        body = fadd(fmul(binary("sub", fconst(1), z), n), fmul(z, h_prev(b, j)));
      } else {
        const E v = fadd(from_x(0), from_h(0));
        body = mode == "RNN_TANH" ? unary("tanh", v) : binary("max", v, fconst(0));
      }
      const int st = c.compute({steps, batch, parts, hid}, f, body, ReduceOp::None, {}, tag + "_state");
      if (gh != gh_id || st != st_id) throw Unsupported("the recurrent state's tensors were not created in order");
      p.tensors[static_cast<size_t>(st)].loop = loop;
      state[static_cast<size_t>(q)] = st;
    }
  }
  // output: the last layer's h at every step, both directions side by side.
  const E k = var(2);
  const E ot = batch_first ? var(1) : var(0), ob = batch_first ? var(0) : var(1);
  const int last_f = state[static_cast<size_t>((layers - 1) * dirs)];
  E out_body = load(last_f, {ot, ob, iconst(0), k}, f);
  if (dirs == 2) {
    const int last_b = state[static_cast<size_t>((layers - 1) * dirs + 1)];
    const E low = lt(k, iconst(hid));
    out_body = select(low, load(last_f, {ot, ob, iconst(0), select(low, k, iconst(0))}, f),
                      load(last_b, {ot, ob, iconst(0), select(low, iconst(0), sub(k, iconst(hid)))}, f));
  }
  const std::vector<int64_t> out_shape =
      batch_first ? std::vector<int64_t>{batch, steps, dirs * hid} : std::vector<int64_t>{steps, batch, dirs * hid};
  const int out = c.compute(out_shape, f, out_body, ReduceOp::None, {}, "_out");
  // h_n / c_n [layers * dirs, batch, hidden]: each layer-direction's state at its last step.
  auto final_state = [&](int64_t part) {
    E body = fconst(0);
    for (int64_t q = layers * dirs; q-- > 0;) {
      const int64_t last = q % dirs == 0 ? steps - 1 : 0;
      const E v = load(state[static_cast<size_t>(q)], {iconst(last), var(1), iconst(part), var(2)}, f);
      body = q == layers * dirs - 1 ? v : select(ieq(var(0), q), v, body);
    }
    return c.compute({layers * dirs, batch, hid}, f, body, ReduceOp::None, {}, part ? "_cn" : "_hn");
  };
  const int hn = final_state(0);
  const int cn = parts == 2 ? final_state(1) : hn;
  return Val::list({Val::tensor(out), Val::tensor(hn), Val::tensor(cn)});
}

}  // namespace

void add_recurrent(Table& t) { t["mblast.rnn"] = lower_rnn; }

}  // namespace mblast::lower
