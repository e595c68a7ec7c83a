#include "mblast/paths.h"

#include <cstdlib>

namespace mblast {

namespace fs = std::filesystem;

namespace {
fs::path env_or(const char* var, const char* xdg, const char* home_rel) {
  if (const char* v = std::getenv(var); v && *v) return v;
  if (const char* x = std::getenv(xdg); x && *x) return fs::path(x) / "mblast";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / home_rel / "mblast";
}
}  // namespace

fs::path self_executable() { return fs::read_symlink("/proc/self/exe"); }

fs::path cache_dir() { return env_or("MBLAST_CACHE_DIR", "XDG_CACHE_HOME", ".cache"); }
fs::path config_dir() { return env_or("MBLAST_CONFIG_DIR", "XDG_CONFIG_HOME", ".config"); }

fs::path data_dir() {
  if (const char* v = std::getenv("MBLAST_HOME"); v && *v) return v;
#ifdef MBLAST_SOURCE_DIR
  if (fs::exists(fs::path(MBLAST_SOURCE_DIR) / "include" / "mblast" / "abi.h")) return MBLAST_SOURCE_DIR;
#endif
  return self_executable().parent_path().parent_path() / "share" / "mblast";
}

}  // namespace mblast
