#include "mblast/error.h"

namespace mblast {

std::string describe_call(const std::string& what, const char* expr, const char* file, int line) {
  std::string f = file;
  if (auto pos = f.rfind("/backends/"); pos != std::string::npos)
    f = f.substr(pos + 1);
  else if (auto p2 = f.rfind("/src/"); p2 != std::string::npos)
    f = f.substr(p2 + 1);
  return what + " (" + expr + " at " + f + ":" + std::to_string(line) + ")";
}

}  // namespace mblast
