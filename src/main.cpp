#include <string>
#include <vector>

#include "mblast/driver/cli.h"
#include "mblast/kb/database.h"
#include "mblast/process.h"

int main(int argc, char** argv) {
  mblast::restart_with_huge_pages(argv);  // the driver's own gigabytes of payload too
  // A password in a --kb URL stays in this process's copy only: `ps` shows the arguments' memory.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> copy;
  for (auto& a : args) copy.push_back(a.data());
  copy.push_back(nullptr);
  mblast::kb::hide_kb_passwords_in_arguments(argc, argv);
  return mblast::cli_main(argc, copy.data());
}
