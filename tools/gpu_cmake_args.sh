# Sourced by the GPU scripts (bash): sets the array gpu_cmake_args to the cmake arguments that point
# at Debian's development files unpacked into $ROOT/.deps (tools/gpu_deps.sh), for what the GPU
# machine lacks: xxhash, sqlite3 and curl's headers, and libpq (../shared/MACHINES.md); libpq's
# shared libraries from .deps are found at run time through LD_LIBRARY_PATH, set here.
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
if [[ -f $ROOT/.deps/usr/include/postgresql/libpq-fe.h && ! -f /usr/include/postgresql/libpq-fe.h ]]; then
  gpu_cmake_args+=("-DPostgreSQL_INCLUDE_DIR=$ROOT/.deps/usr/include/postgresql"
    "-DPostgreSQL_LIBRARY=$ROOT/.deps/usr/lib/x86_64-linux-gnu/libpq.so")
  export LD_LIBRARY_PATH=$ROOT/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
