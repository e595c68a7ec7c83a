// Error types shared by the driver and the runner.
//
// UserError: bad input from the person at the keyboard (a malformed problem, an unknown target);
//            printed as one line, exit status 2, nothing written.
// Error:     an infrastructure failure (a runner that cannot start, a driver that is missing);
//            printed as one line, exit status 1.
// Candidate failures are neither: they are results (see protocol.h, FailureKind).
#pragma once

#include <stdexcept>
#include <string>

namespace mblast {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UserError : public Error {
 public:
  using Error::Error;
};

// Builds "what (expr at file:line)" for the per-API check macros of the backends.
std::string describe_call(const std::string& what, const char* expr, const char* file, int line);

}  // namespace mblast
