add_library(mblast_warnings INTERFACE)
target_compile_options(mblast_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter)
