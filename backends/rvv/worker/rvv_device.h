// The rvv Device: host memory inside the riscv64 worker program (candidate.rv64), which runs
// under qemu-user (execution kind "qemu") or natively on a board (kind "native").
// Compiled only for riscv64, into librvv_worker.a; private to backends/rvv.
//
// Timing under QEMU: timer_begin()/timer_end() execute the region markers
// (qemu_plugin/region_markers.h); the plugin counts the instructions between them and writes
// the counts when the process exits. timer_end() therefore returns a placeholder of 1 per call
// (so the worker's loop stops after min_repeats calls, the same number every time), and the
// runner replaces the samples with the counts (RvvBackend::finish_timing).
// Timing on a board: wall seconds (CLOCK_MONOTONIC); the cycle counter too where user mode may
// read it, written to rvv_cycles.json in the working folder when the device closes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mblast/runner/backend.h"

namespace mblast::runner::rvv {

// What the worker finds out about the hart it runs on. Probing uses SIGILL handlers, so it
// is safe on cores without V or where rdcycle traps.
struct HartInfo {
  bool has_vector = false;
  int vlen_bits = 0;  // from the vlenb CSR; 0 without V
  bool cycles_readable = false;
  std::string cycles_note;  // why not, when not
};
HartInfo probe_hart();

class RvvDevice final : public Device {
 public:
  // target: the target JSON (arch.vlen, arch.march, execution.kind). Throws BackendError when
  // the hart lacks V or its VLEN differs from arch.vlen.
  explicit RvvDevice(const nlohmann::json& target);
  ~RvvDevice() override;

  mblast_context context() override;
  nlohmann::json describe() override;
  Buffer allocate(size_t nbytes) override;
  void release(Buffer& b) override;
  void upload(Buffer& b, std::span<const std::byte> host) override;
  void download(const Buffer& b, std::span<std::byte> host) override;
  void download_range(const Buffer& b, size_t offset, std::span<std::byte> host) override;
  void fill(Buffer& b, std::byte value) override;
  bool guards_intact(const Buffer& b) override;
  void synchronize() override {}
  std::string health() override { return ""; }
  void flush_caches() override;
  void timer_begin() override;
  double timer_end() override;
  std::string timing_method() override;
  std::string timing_unit() override { return qemu_ ? "instructions" : "s"; }
  Peaks measure_peaks() override;

 private:
  void write_cycles_file();

  nlohmann::json target_;
  bool qemu_ = true;
  HartInfo hart_;
  std::vector<std::byte> flush_buf_;
  bool timed_ = false;  // native: timer_begin ran, so rvv_cycles.json is written at close
  double t0_ = 0;
  uint64_t c0_ = 0;
  std::vector<uint64_t> cycles_;
};

// The marker instructions, each at one fixed address (the runner gives both addresses to the
// plugin; markers anywhere else are ignored and reported).
extern "C" void mblast_rvv_region_begin(void);
extern "C" void mblast_rvv_region_end(void);

// Native-only peak kernels (rvv_peaks.cpp, built with V): bytes/s of a copy loop and FLOP/s
// of an FMA loop. Call only when the hart has V.
double rvv_copy_bandwidth();
double rvv_fma_flops();

}  // namespace mblast::runner::rvv
