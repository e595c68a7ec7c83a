// Every command queue created in the worker process, whoever created it, so that the clock
// stops only after the candidate's own queues have finished. Private to backends/opencl.
//
// How: every OpenCL object of an ICD platform starts with a pointer to its vendor's dispatch
// table, and every path into the vendor goes through that table: the ICD loader's entry points,
// the loader reached by dlopen/dlsym, and a candidate calling `obj->dispatch->...` itself. The
// vendor library exports none of its own entry points (PoCL exports only its ICD hooks and
// clGetExtensionFunctionAddress*, which offers no queue-creating extension). So the table's
// queue-creating entries are replaced by recorders that forward to the vendor's and keep a
// reference on each queue made. Code that rewrites the table itself is seen at the next check.
#pragma once

#include "opencl_device.h"

#include <string>

namespace mblast::runner::opencl {

// Replaces the queue-creating entries of the dispatch table of every platform the ICD loader
// lists (once per table; later calls add only new tables). Throws BackendError when a table
// cannot be changed. Not thread-safe against concurrent OpenCL calls: call before any
// candidate code runs.
void record_queues_of_all_platforms();

// Waits for every recorded queue except `own` (clFinish), then drops those that nobody but this
// record holds. Returns "" or, when the work could not be accounted for, why (the dispatch table
// was changed back, or a queue could not be finished): the candidate is then refused.
std::string finish_recorded_queues(cl_command_queue own);

// How many queues are held now (for tests and the timing method).
size_t recorded_queue_count();

}  // namespace mblast::runner::opencl
