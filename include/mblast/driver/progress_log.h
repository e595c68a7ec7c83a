// Makes the default logger's lines clear the live progress line first (src/driver/progress_log.cpp).
#pragma once

namespace mblast {

// Wraps each sink of spdlog's default logger once; safe to call again.
void route_logs_around_progress();

}  // namespace mblast
