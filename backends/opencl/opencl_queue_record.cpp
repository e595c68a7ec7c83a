#include "opencl_queue_record.h"

#include <CL/cl_icd.h>

#include <mutex>
#include <vector>

namespace mblast::runner::opencl {

namespace {

using CreateQueue = cl_command_queue(CL_API_CALL*)(cl_context, cl_device_id, cl_command_queue_properties, cl_int*);
using CreateQueueWithProperties = cl_command_queue(CL_API_CALL*)(cl_context, cl_device_id, const cl_ulong*, cl_int*);

// One vendor's table and the entries it had before it was changed.
struct PatchedTable {
  cl_icd_dispatch* table;
  CreateQueue create_queue;
  CreateQueueWithProperties create_queue_with_properties;  // OpenCL 2.0; may be null
};

std::mutex g_mutex;
std::vector<PatchedTable> g_tables;      // guarded by g_mutex
std::vector<cl_command_queue> g_queues;  // each with one reference of ours; guarded by g_mutex

// The table an object's calls go through: the first word of every ICD object.
cl_icd_dispatch* table_of(void* object) { return *static_cast<cl_icd_dispatch**>(object); }

const PatchedTable* patched_for(cl_icd_dispatch* t) {
  for (const auto& p : g_tables)
    if (p.table == t) return &p;
  return nullptr;
}

void remember(cl_command_queue q) {
  if (!q) return;
  // Our own reference: a candidate that releases its queue right after enqueueing still has its
  // work finished here, and the handle stays valid until we drop it.
  if (table_of(q)->clRetainCommandQueue(q) != CL_SUCCESS) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_queues.push_back(q);
}

cl_command_queue CL_API_CALL recording_create_queue(cl_context ctx, cl_device_id dev, cl_command_queue_properties props,
                                                    cl_int* err) {
  CreateQueue real = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (const PatchedTable* p = patched_for(table_of(ctx))) real = p->create_queue;
  }
  if (!real) {  // a context of a table we never saw: cannot forward safely
    if (err) *err = CL_INVALID_CONTEXT;
    return nullptr;
  }
  cl_command_queue q = real(ctx, dev, props, err);
  remember(q);
  return q;
}

cl_command_queue CL_API_CALL recording_create_queue_with_properties(cl_context ctx, cl_device_id dev,
                                                                    const cl_ulong* props, cl_int* err) {
  CreateQueueWithProperties real = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (const PatchedTable* p = patched_for(table_of(ctx))) real = p->create_queue_with_properties;
  }
  if (!real) {
    if (err) *err = CL_INVALID_OPERATION;
    return nullptr;
  }
  cl_command_queue q = real(ctx, dev, props, err);
  remember(q);
  return q;
}

bool intact(const PatchedTable& p) {
  return p.table->clCreateCommandQueue == &recording_create_queue &&
         (!p.create_queue_with_properties || reinterpret_cast<void*>(p.table->clCreateCommandQueueWithProperties) ==
                                                 reinterpret_cast<void*>(&recording_create_queue_with_properties));
}

}  // namespace

void record_queues_of_all_platforms() {
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) return;
  std::vector<cl_platform_id> plats(n);
  MBLAST_CL_CHECK(clGetPlatformIDs(n, plats.data(), nullptr));
  std::lock_guard<std::mutex> lock(g_mutex);
  for (cl_platform_id p : plats) {
    cl_icd_dispatch* t = table_of(p);
    if (!t || patched_for(t)) continue;
    PatchedTable rec{t, t->clCreateCommandQueue,
                     reinterpret_cast<CreateQueueWithProperties>(t->clCreateCommandQueueWithProperties)};
    if (!rec.create_queue) throw BackendError("the OpenCL platform's dispatch table has no clCreateCommandQueue");
    // The vendor's table lives in its writable data (PoCL: .data, checked in /proc/self/maps).
    t->clCreateCommandQueue = &recording_create_queue;
    if (rec.create_queue_with_properties)
      t->clCreateCommandQueueWithProperties =
          reinterpret_cast<decltype(t->clCreateCommandQueueWithProperties)>(&recording_create_queue_with_properties);
    g_tables.push_back(rec);
  }
}

std::string finish_recorded_queues(cl_command_queue own) {
  std::vector<cl_command_queue> queues;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& p : g_tables)
      if (!intact(p))
        return "the candidate changed the OpenCL dispatch table's clCreateCommandQueue entries: work on queues it "
               "creates could not be counted";
    queues = g_queues;
  }
  std::string why;
  std::vector<cl_command_queue> drop;
  for (cl_command_queue q : queues) {
    if (q == own) continue;
    const cl_int e = table_of(q)->clFinish(q);
    if (e != CL_SUCCESS && why.empty())
      why = "a command queue the candidate created could not be finished (" + cl_error_name(e) +
            "): its work could not be counted";
    cl_uint refs = 0;
    if (table_of(q)->clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof refs, &refs, nullptr) == CL_SUCCESS &&
        refs == 1)
      drop.push_back(q);  // released by the candidate: nothing can reach it any more
  }
  if (!drop.empty()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (cl_command_queue q : drop) {
      std::erase(g_queues, q);
      table_of(q)->clReleaseCommandQueue(q);
    }
  }
  return why;
}

size_t recorded_queue_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_queues.size();
}

}  // namespace mblast::runner::opencl
