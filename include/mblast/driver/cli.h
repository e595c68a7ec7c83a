#pragma once

namespace mblast {
// The whole program: parses argv, runs one command, returns the exit status.
// 0 success, 1 candidate rejected or infrastructure error, 2 bad input.
int cli_main(int argc, char** argv);
}  // namespace mblast
