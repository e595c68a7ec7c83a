// Runs `mblast ARGS...` in this process through cli_main, capturing what it prints: for the
// suites that test commands end to end (the KB's, the transports').
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mblast/driver/cli.h"

namespace mblast::testing {

struct CliResult {
  int rc = 0;
  std::string out, err;
};

inline CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "mblast");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out;
  auto* old = std::cout.rdbuf(out.rdbuf());
  ::testing::internal::CaptureStderr();
  CliResult r;
  r.rc = cli_main(static_cast<int>(argv.size()), argv.data());
  r.err = ::testing::internal::GetCapturedStderr();
  std::cout.rdbuf(old);
  r.out = out.str();
  return r;
}

}  // namespace mblast::testing
