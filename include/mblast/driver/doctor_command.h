// `mblast doctor`: what this installation found — runner, backends, drivers, toolchains.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace mblast {

struct DoctorArgs {
  bool json = false;
  std::string runner;  // runner URL; empty: local
};

void add_doctor(CLI::App& app, DoctorArgs& a);
int run_doctor(const DoctorArgs& a);

}  // namespace mblast
