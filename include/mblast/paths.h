// Where mblast finds its own files and keeps its caches.
#pragma once

#include <filesystem>

namespace mblast {

// This executable (/proc/self/exe).
std::filesystem::path self_executable();
// The cache folder: $MBLAST_CACHE_DIR, else $XDG_CACHE_HOME/mblast, else ~/.cache/mblast.
std::filesystem::path cache_dir();
// The user's config folder: $MBLAST_CONFIG_DIR, else $XDG_CONFIG_HOME/mblast, else ~/.config/mblast.
std::filesystem::path config_dir();
// The folder of mblast's data files (include/, targets/, problems/): $MBLAST_HOME, else the
// source tree this binary was built from, else <prefix>/share/mblast next to the binary.
std::filesystem::path data_dir();

}  // namespace mblast
