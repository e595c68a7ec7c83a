#include "mblast/driver/cli.h"
#include "mblast/process.h"

int main(int argc, char** argv) {
  mblast::restart_with_huge_pages(argv);  // the driver's own gigabytes of payload too
  return mblast::cli_main(argc, argv);
}
