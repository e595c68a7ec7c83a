// The numpy reference of the transposed-convolution test problems (gpu_test_support.h and
// rvv_variants_test.cpp).
#pragma once

#include <string>

namespace mblast::policy {

// NCHW transposed convolution in numpy (float64) by its definition, a scatter: input (ih, iw)
// through tap (r, q) lands on (ih * sh - ph + r * dh, iw * sw - pw + q * dw); the generators gather.
inline const std::string kConvTransposeReference =
    R"PY(def conv_transpose(x, wt, sh, sw, ph, pw, oph, opw, dh, dw, groups):
    n, cin, h, w = x.shape
    cig, cog, kh, kw = cin // groups, wt.shape[1], wt.shape[2], wt.shape[3]
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + 1 + oph
    ow = (w - 1) * sw - 2 * pw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, cog * groups, ph + oh + kh * dh + sh, pw + ow + kw * dw + sw))
    for g in range(groups):
        xg = x[:, g * cig:(g + 1) * cig]
        for r in range(kh):
            for q in range(kw):
                contrib = np.einsum("nchw,cd->ndhw", xg, wt[g * cig:(g + 1) * cig, :, r, q])
                full[:, g * cog:(g + 1) * cog, r * dh:r * dh + (h - 1) * sh + 1:sh, q * dw:q * dw + (w - 1) * sw + 1:sw] += contrib
    return full[:, :, ph:ph + oh, pw:pw + ow]


)PY";

}  // namespace mblast::policy
