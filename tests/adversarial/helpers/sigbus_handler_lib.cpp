// A shared library that installs a SIGBUS handler when it is loaded: what a candidate would bring
// in a second library of its own (second_library_handler), whose handler could do the call's work
// in the checks after it, as work_in_checks does from the candidate's own library.
#include <signal.h>

static void on_bus(int) {}

__attribute__((constructor)) static void install_handler() { signal(SIGBUS, on_bus); }
