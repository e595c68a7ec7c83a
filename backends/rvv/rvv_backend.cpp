// The rvv backend, runner side (see rvv_backend.h and README.md).
#include "rvv_backend.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "mblast/paths.h"
#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/stats.h"
#include "mblast/tensor.h"
#include "rvv_elf.h"

// Defaults from backends/rvv/CMakeLists.txt.
#ifndef MBLAST_RVV_CC
#define MBLAST_RVV_CC "clang-19"
#endif
#ifndef MBLAST_RVV_SYSROOT
#define MBLAST_RVV_SYSROOT "/usr/riscv64-linux-gnu"
#endif
#ifndef MBLAST_RVV_GCC_TOOLCHAIN
#define MBLAST_RVV_GCC_TOOLCHAIN "/usr"
#endif
#ifndef MBLAST_RVV_WORKER_MISSING
#define MBLAST_RVV_WORKER_MISSING ""  // why CMake did not build librvv_worker.a, or ""
#endif

namespace mblast::runner::rvv {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

#if defined(__riscv)
constexpr bool kCross = false;  // mblast-runner itself runs on the board
#else
constexpr bool kCross = true;
#endif

// The file the plugin writes in the worker's folder, and the one a board's Device writes.
constexpr const char* kCountsFile = "insn_counts.json";
constexpr const char* kCyclesFile = "rvv_cycles.json";

// The probe: a candidate that is never called. Linked like any candidate, so a probe that
// answers proves the compiler, the worker library, qemu and the plugin all work.
constexpr const char* kProbeSource =
    "/* mblast rvv probe program: opens the device and answers; never called. */\n"
    "int mblast_run(const void* c, void* s, const void* i, int ni, const void* p, int np, void* o, int no) {\n"
    "  return 0;\n"
    "}\n";

std::string execution_kind(const json& target) {
  return target.value("execution", json::object()).value("kind", "qemu");
}

std::string compiler(const json& target) {
  if (target.contains("build") && target["build"].contains("cc")) return target["build"]["cc"].get<std::string>();
  if (const char* e = std::getenv("MBLAST_RVV_CC"); e && *e) return e;
  return MBLAST_RVV_CC;
}

// The same clang as a C++ driver (to link libstdc++); gcc's C++ driver otherwise.
std::vector<std::string> link_driver(const std::string& cc) {
  if (fs::path(cc).filename().string().find("clang") != std::string::npos) return {cc, "--driver-mode=g++"};
  std::string cxx = cc;
  if (auto p = cxx.rfind("gcc"); p != std::string::npos)
    cxx.replace(p, 3, "g++");
  else if (cxx == "cc")
    cxx = "c++";
  return {cxx};
}

std::vector<std::string> cross_flags() {
  if (!kCross) return {};
  return {"--target=riscv64-linux-gnu", "--gcc-toolchain=" MBLAST_RVV_GCC_TOOLCHAIN};
}

std::string march(const json& target) {
  const json arch = target.value("arch", json::object());
  std::string m = arch.value("march", "rv64gcv");
  if (arch.value("zvfh", false) && m.find("zvfh") == std::string::npos) m += "_zvfh";
  return m;
}

int vlen(const json& target) { return target.value("arch", json::object()).value("vlen", 128); }

// Where librvv_worker.a (riscv64/) and the plugin are: $MBLAST_RVV_LIB_DIR, else
// <bin>/../lib/mblast (the build tree and an installed prefix have the same layout).
fs::path lib_dir() {
  if (const char* e = std::getenv("MBLAST_RVV_LIB_DIR"); e && *e) return e;
  return self_executable().parent_path().parent_path() / "lib" / "mblast";
}
fs::path worker_archive() { return lib_dir() / "riscv64" / "librvv_worker.a"; }
fs::path plugin_path() { return lib_dir() / "libmblast_insn_count.so"; }

std::optional<fs::path> qemu_program(const json& target) {
  return find_program(target.value("execution", json::object()).value("qemu", "qemu-riscv64"));
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write " + p.string());
}

// Turns a timing message into the failure it has to be reported as.
void fail_timing(json& msg, protocol::FailureKind kind, const std::string& reason) {
  msg["stage"] = "failed";
  msg["failed_stage"] = "timing";
  msg["failure_kind"] = protocol::failure_kind_name(kind);
  msg["reason"] = reason;
}

double median_of(const std::vector<double>& v) { return summarize(v).median; }

}  // namespace

std::string RvvBackend::unavailable_reason(const json& target) {
  const std::string kind = execution_kind(target);
  if (kind != "qemu" && kind != "native") return "unknown execution kind '" + kind + "' (qemu or native)";
  if (kind == "native" && kCross)
    return "execution kind 'native' needs mblast-runner running on the riscv64 board itself "
           "(runner.transport ssh, with mblast-runner built there)";
  const std::string cc = compiler(target);
  auto cc_path = find_program(cc);
  if (!cc_path) return cc + " not found (install clang-19 and lld-19, or set MBLAST_RVV_CC)";
  if (kCross) {
    if (!fs::exists(fs::path(MBLAST_RVV_SYSROOT) / "lib" / "libc.a"))
      return "the riscv64 cross libc is missing (" MBLAST_RVV_SYSROOT "/lib/libc.a; install libc6-dev-riscv64-cross)";
    std::error_code ec;
    const fs::path real = fs::canonical(*cc_path, ec);
    if (!find_program("ld.lld") && !(!ec && fs::exists(real.parent_path() / "ld.lld")))
      return "ld.lld not found (install lld-19)";
  }
  if (!fs::exists(worker_archive())) {
    std::string why = std::string(MBLAST_RVV_WORKER_MISSING);
    return "the riscv64 worker library " + worker_archive().string() + " is missing" +
           (why.empty() ? std::string(" (build the mblast_rvv_worker target)") : ": " + why);
  }
  if (kind == "qemu") {
    if (!qemu_program(target))
      return "qemu-riscv64 not found (install qemu-user; qemu-user-static cannot load plugins)";
    if (!fs::exists(plugin_path()))
      return "the QEMU plugin " + plugin_path().string() + " is missing (build mblast_insn_count)";
  }
  return "";
}

std::string RvvBackend::toolchain_id(const json& target) {
  const std::string cc = compiler(target);
  std::lock_guard<std::mutex> lock(mu_);
  auto v = version_of_.find(cc);
  if (v == version_of_.end()) {
    auto r = run_command({cc, "--version"}, 20);
    v = version_of_.emplace(cc, r.output.substr(0, r.output.find('\n'))).first;
  }
  std::string lib_hash = "none";
  std::error_code ec;
  const fs::path a = worker_archive();
  const auto size = fs::file_size(a, ec);
  if (!ec) {
    const auto mtime = fs::last_write_time(a, ec).time_since_epoch().count();
    const std::string key = a.string() + "|" + std::to_string(mtime) + "|" + std::to_string(size);
    auto h = archive_hash_.find(key);
    if (h == archive_hash_.end()) {
      std::ifstream in(a, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      h = archive_hash_.emplace(key, content_hash_hex(std::as_bytes(std::span(bytes)))).first;
    }
    lib_hash = h->second;
  }
  return "rvv|" + v->second + "|worker " + lib_hash + (kCross ? "|cross" : "|native");
}

BuildOutcome RvvBackend::build(const BuildRequest& req) {
  BuildOutcome out;
  const fs::path src = req.out_dir / "candidate.c";
  const fs::path obj = req.out_dir / "candidate.o";
  write_file(src, req.source);
  out.artifact = req.out_dir / "candidate.rv64";

  const std::string cc = compiler(req.target);
  const std::string m = "-march=" + march(req.target);
  // Every rvv candidate is built at -O3 (clang's auto-vectoriser on, no fast-math), so an
  // intrinsics candidate and the plain-C baseline differ only in their code.
  std::vector<std::string> compile = {cc};
  for (const auto& f : cross_flags()) compile.push_back(f);
  compile.insert(compile.end(), {m, "-mabi=lp64d", "-O3", "-I" + req.include_dir.string()});
  if (req.target.contains("build") && req.target["build"].contains("cflags"))
    for (const auto& f : req.target["build"]["cflags"]) compile.push_back(f.get<std::string>());
  compile.insert(compile.end(), {"-c", src.string(), "-o", obj.string()});

  // The worker library comes first and whole: its .preinit/.init entries run before the
  // candidate's, and a candidate that defines main() or any worker symbol fails to link.
  std::vector<std::string> link = link_driver(cc);
  for (const auto& f : cross_flags()) link.push_back(f);
  link.insert(link.end(), {m, "-mabi=lp64d", "-static"});
  if (kCross) link.push_back("-fuse-ld=lld");
  link.insert(link.end(), {"-Wl,--gc-sections", "-Wl,--whole-archive", worker_archive().string(),
                           "-Wl,--no-whole-archive", obj.string(), "-lm", "-o", out.artifact.string()});
  out.command = shell_quote(compile) + " && " + shell_quote(link);

  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(compile, req.timeout_s, req.out_dir);
  out.log = r.output;
  if (r.timed_out) out.log += "\n[mblast] the compiler did not finish within " + std::to_string(req.timeout_s) + " s";
  if (!r.ok()) return out;
  const double left = req.timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto l = run_command(link, std::max(left, 5.0), req.out_dir);
  out.log += l.output;
  if (l.timed_out) out.log += "\n[mblast] the linker did not finish in time";
  out.ok = l.ok();
  return out;
}

fs::path RvvBackend::probe_program(const json& target) {
  const std::string key_text = toolchain_id(target) + "\n" + march(target) + "\n" + kProbeSource;
  const std::string key = content_hash_hex(std::as_bytes(std::span(key_text))).substr(0, 16);
  const fs::path root = cache_dir() / "rvv";
  const fs::path dir = root / ("probe-" + key);
  const fs::path prog = dir / "candidate.rv64";
  if (fs::exists(prog)) return prog;
  fs::create_directories(root);
  const fs::path tmp = root / ("tmp-probe-" + std::to_string(::getpid()) + "-" + key);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  BuildRequest req{kProbeSource, "probe.c", target, tmp, data_dir() / "include", 120};
  BuildOutcome b = build(req);
  if (!b.ok) {
    fs::remove_all(tmp, ec);
    throw BackendError("cannot build the rvv probe program: " + b.command + "\n" + b.log);
  }
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another runner was first: use theirs
  return prog;
}

std::vector<std::string> RvvBackend::worker_command(const fs::path& self, const fs::path& artifact,
                                                    const json& target) {
  const fs::path prog = artifact.empty() ? probe_program(target) : artifact;
  if (execution_kind(target) == "native") return {prog.string()};

  const auto qemu = qemu_program(target);
  if (!qemu) throw BackendError("qemu-riscv64 not found");
  auto pcs = elf_symbol_values(prog, {"mblast_rvv_region_begin", "mblast_rvv_region_end"});
  if (pcs.size() != 2) throw BackendError(prog.string() + " lacks the region markers of librvv_worker.a");
  std::ostringstream plugin;
  // key=: the plugin echoes it in its report and hides it from the guest (insn_count.c), so a
  // report the candidate wrote itself is told apart from the plugin's.
  plugin << plugin_path().string() << ",out=" << kCountsFile << std::hex << ",begin_pc=0x"
         << pcs["mblast_rvv_region_begin"] << ",end_pc=0x" << pcs["mblast_rvv_region_end"]
         << ",key=" << issue_count_key();
  // QEMU 7.2 has no zvfh property; it executes SEW=16 vector FP with V alone.
  const std::string cpu = "rv64,v=true,vlen=" + std::to_string(vlen(target)) + ",vext_spec=v1.0";
  return {qemu->string(), "-cpu", cpu, "-L", MBLAST_RVV_SYSROOT, "-plugin", plugin.str(), prog.string()};
}

std::string RvvBackend::issue_count_key() {
  std::random_device rd;  // the kernel's entropy: nothing a candidate could replay
  std::ostringstream key;
  for (int i = 0; i < 4; ++i) key << std::hex << std::setw(8) << std::setfill('0') << rd();
  std::lock_guard<std::mutex> lock(mu_);
  count_keys_.insert(key.str());
  count_key_order_.push_back(key.str());
  // Workers that never time (verification, probes) never redeem theirs: keep the newest only.
  while (count_key_order_.size() > 4096) {
    count_keys_.erase(count_key_order_.front());
    count_key_order_.pop_front();
  }
  return key.str();
}

bool RvvBackend::redeem_count_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  // Each key is good for one report: a report copied from an earlier worker is refused.
  return count_keys_.erase(key) == 1;
}

std::vector<fs::path> RvvBackend::sandbox_read_paths() const { return {lib_dir(), cache_dir() / "rvv"}; }

void RvvBackend::finish_timing(json& msg, const fs::path& worker_dir, const json& target) {
  const std::vector<double> placeholders = msg.value("samples", std::vector<double>{});
  if (execution_kind(target) == "native") {
    std::ifstream in(worker_dir / kCyclesFile);
    json c = in ? json::parse(in, nullptr, false) : json();
    if (c.is_object() && c.contains("cycles") && c["cycles"].size() == placeholders.size() && !placeholders.empty()) {
      std::vector<double> cyc;
      json per = json::array();
      for (const auto& x : c["cycles"]) {
        cyc.push_back(x.get<double>());
        per.push_back({{"cycles", x}});
      }
      msg["cost"] = {{"cycles_median", median_of(cyc)}, {"per_sample", per}};
    } else {
      msg["cost"] = {{"cycles_median", nullptr},
                     {"note", c.is_object() ? c.value("note", "no cycle counts") : "no cycle counts written"}};
    }
    return;
  }

  std::ifstream in(worker_dir / kCountsFile);
  if (!in) {
    fail_timing(msg, protocol::FailureKind::runner_error,
                "the QEMU instruction-count plugin wrote no counts (qemu ended abnormally; see the log)");
    return;
  }
  const json counts = json::parse(in, nullptr, false);
  if (counts.is_discarded() || !counts.contains("regions")) {
    fail_timing(msg, protocol::FailureKind::runner_error, "the QEMU plugin's counts are not valid JSON");
    return;
  }
  if (!counts.contains("key") || !counts["key"].is_string() || !redeem_count_key(counts["key"].get<std::string>())) {
    fail_timing(msg, protocol::FailureKind::timing_inconsistent,
                "the instruction counts were not written by the counting plugin (its report lacks this worker's key)");
    return;
  }
  const auto threads = counts.value("threads_created", 0ull), processes = counts.value("processes_created", 0ull),
             execs = counts.value("execs", 0ull);
  if (processes > 0 || threads > 0 || execs > 0) {
    std::string what = processes > 0 ? "created a process (clone without CLONE_THREAD)"
                       : threads > 0 ? "created a thread (clone with CLONE_THREAD, or clone3)"
                                     : "replaced its program (execve)";
    fail_timing(msg, protocol::FailureKind::launch_failed,
                "the candidate " + what +
                    ": under QEMU only the worker's own thread is counted, so its work would "
                    "escape the count; rvv candidates must compute on the calling thread (" +
                    std::to_string(processes) + " processes, " + std::to_string(threads) + " threads, " +
                    std::to_string(execs) + " execs)");
    return;
  }
  const json& regions = counts["regions"];
  const auto foreign = counts.value("foreign_markers", 0ull), unmatched = counts.value("unmatched_markers", 0ull);
  if (foreign > 0 || unmatched > 0 || regions.size() > placeholders.size()) {
    fail_timing(msg, protocol::FailureKind::launch_failed,
                "the candidate executed mblast's region-marker instructions (" + std::to_string(foreign) +
                    " foreign, " + std::to_string(unmatched) + " out of order, " + std::to_string(regions.size()) +
                    " regions for " + std::to_string(placeholders.size()) +
                    " calls): its instruction count cannot be trusted");
    return;
  }
  if (regions.size() != placeholders.size() || counts.value("regions_dropped", 0ull) > 0 || placeholders.empty()) {
    fail_timing(msg, protocol::FailureKind::runner_error,
                "the QEMU plugin counted " + std::to_string(regions.size()) + " regions for " +
                    std::to_string(placeholders.size()) + " timed calls");
    return;
  }
  const json fields = counts.value("region_fields", json::array());
  std::vector<double> total, vector;
  json per = json::array();
  for (const auto& r : regions) {
    json s = json::object();
    for (size_t k = 0; k < fields.size() && k < r.size(); ++k) s[fields[k].get<std::string>()] = r[k];
    total.push_back(s.value("insns", 0.0));
    vector.push_back(s.value("vector_insns", 0.0));
    per.push_back(s);
  }
  msg["samples"] = total;
  json process = counts;
  process.erase("regions");
  process.erase("region_fields");
  msg["cost"] = {{"total_insns_median", median_of(total)},
                 {"vector_insns_median", median_of(vector)},
                 {"vector_fraction", median_of(total) > 0 ? median_of(vector) / median_of(total) : 0.0},
                 {"per_sample", per},
                 {"process", process}};
}

std::unique_ptr<Device> RvvBackend::open(const json&) {
  throw BackendError("the rvv device exists only inside the riscv64 worker");
}

}  // namespace mblast::runner::rvv
