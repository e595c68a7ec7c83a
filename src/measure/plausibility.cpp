// The speed-of-light bounds of a result (plausibility.h).
#include "mblast/measure/plausibility.h"

#include <algorithm>

#include <fmt/format.h>

namespace mblast {

using nlohmann::json;

std::string implausible_time(const Problem& p, const json& peaks, double median_s) {
  if (!peaks.is_object() || median_s <= 0) return "";
  const double bw = peaks.value("bandwidth_bytes_per_s", 0.0);
  double fl = 0;
  for (const char* k : {"fp32_flops_per_s", "tf32_flops_per_s", "bf16_flops_per_s"})
    fl = std::max(fl, peaks.value(k, 0.0));
  const double t_bytes = bw > 0 ? p.bytes / bw : 0, t_flops = fl > 0 ? p.flops / fl : 0;
  if (t_bytes > 0 && median_s * kBandwidthMargin < t_bytes)
    return fmt::format(
        "{:.3f} us is {:.1f}x faster than moving the problem's {:.0f} bytes at the device's measured {:.1f} GB/s "
        "allows ({:.3f} us; the bound allows {:.0f}x)",
        median_s * 1e6, t_bytes / median_s, p.bytes, bw / 1e9, t_bytes * 1e6, kBandwidthMargin);
  if (t_flops > 0 && median_s * kComputeMargin < t_flops)
    return fmt::format(
        "{:.3f} us is {:.1f}x faster than the problem's {:.3g} operations at the device's fastest measured "
        "{:.1f} TFLOP/s allow ({:.3f} us; the bound allows {:.0f}x)",
        median_s * 1e6, t_flops / median_s, p.flops, fl / 1e12, t_flops * 1e6, kComputeMargin);
  return "";
}

std::string implausible_count(const Problem& p, const Target& target, const std::string& unit, double median) {
  if (unit != "instructions") return "";
  const int vlen = target.spec.value("arch", json::object()).value("vlen", 0);
  if (vlen <= 0 || p.bytes <= 0) return "";
  const double least = p.bytes / vlen;
  if (median * kCountMargin < least)
    return fmt::format(
        "{:.0f} instructions cannot move the problem's {:.0f} bytes: at VLEN {} even LMUL-8 vector loads and "
        "stores need {:.0f} (the bound allows {:.0f}x fewer)",
        median, p.bytes, vlen, least, kCountMargin);
  return "";
}

}  // namespace mblast
