// The speed of light (docs/measurement.md): no kernel moves the problem's counted bytes faster
// than the device's measured bandwidth, or does its counted operations faster than its fastest
// measured arithmetic (tensor cores included). A result beyond them by more than the margins is
// `implausible_speed`, never a time. The margins leave room for what is honest: bytes a kernel
// need not move (an input it reads only in part), operations a fast algorithm avoids (Winograd
// and FFT convolutions do several times fewer than the direct form counted), a peak measured on
// a busy machine. A cheat that skips the work lands far below them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {

inline constexpr double kBandwidthMargin = 3.0;  // x the measured bandwidth
inline constexpr double kComputeMargin = 8.0;    // x the fastest measured arithmetic
inline constexpr double kCountMargin = 2.0;      // x fewer instructions than the bytes need

// Why a median time (seconds) is implausible against the peaks (the runner's peaks message), or "".
std::string implausible_time(const Problem& p, const nlohmann::json& peaks, double median_s);

// The same for a cost counted in instructions (rvv under QEMU): a vector load or store moves at
// most VLEN bytes (eight registers of VLEN bits), so the counted bytes need bytes / VLEN of them.
std::string implausible_count(const Problem& p, const Target& target, const std::string& unit, double median);

}  // namespace mblast
