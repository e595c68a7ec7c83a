#pragma once

namespace mblast {
inline constexpr const char* kMblastVersion = "0.1.0";
}
