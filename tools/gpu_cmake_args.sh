# Sourced by the GPU scripts (bash): sets the array gpu_cmake_args to the cmake arguments that point
# at Debian's development files unpacked into $ROOT/.deps (tools/gpu_deps.sh), for what the GPU
# machine lacks: xxhash, sqlite3 and curl's headers (../shared/MACHINES.md).
gpu_cmake_args=()
if [[ -f $ROOT/.deps/usr/include/xxhash.h ]]; then
  gpu_cmake_args+=("-DXXHASH_INCLUDE_DIR=$ROOT/.deps/usr/include")
fi
if [[ -f $ROOT/.deps/usr/include/sqlite3.h && ! -f /usr/include/sqlite3.h ]]; then
  gpu_cmake_args+=("-DSQLite3_INCLUDE_DIR=$ROOT/.deps/usr/include"
    "-DSQLite3_LIBRARY=$ROOT/.deps/usr/lib/x86_64-linux-gnu/libsqlite3.a")
fi
if [[ ! -f /usr/include/curl/curl.h && ! -f /usr/include/x86_64-linux-gnu/curl/curl.h &&
  -f $ROOT/.deps/usr/include/x86_64-linux-gnu/curl/curl.h && -f /usr/lib/x86_64-linux-gnu/libcurl.so.4 ]]; then
  gpu_cmake_args+=("-DCURL_INCLUDE_DIR=$ROOT/.deps/usr/include/x86_64-linux-gnu"
    "-DCURL_LIBRARY=/usr/lib/x86_64-linux-gnu/libcurl.so.4")
fi
