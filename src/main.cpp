#include "mblast/driver/cli.h"

int main(int argc, char** argv) { return mblast::cli_main(argc, argv); }
