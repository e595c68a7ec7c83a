// A second look at a timed call's outputs. Once the clock has stopped, the device is synchronised
// and the outputs must hold still: a candidate that hands its work to a thread of its own, or to
// a signal handler, and returns at once races the worker's checks, writing ahead of the reads.
// The worker therefore reads a window of each output first of all, at an offset drawn from the
// kernel's random source after the call returned (the candidate shares the worker's memory, so
// no state in it can be secret), and reads the same window again after the checks: bytes that
// changed in between were written after the clock stopped. A racer must have finished the whole
// output before that first read, the gap of a few system calls, to pass every call.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "mblast/runner/backend.h"

namespace mblast::runner {

struct OutputWindow {
  size_t offset = 0;
  std::vector<std::byte> bytes;
};

// The windows of OUTS (at most 4 KiB of each, at unpredictable offsets), read now.
std::vector<OutputWindow> look_at_outputs(Device& dev, std::span<const Buffer> outs);

// The index of the first output whose window now reads differently, or -1.
int changed_output(Device& dev, std::span<const Buffer> outs, std::span<const OutputWindow> first);

}  // namespace mblast::runner
