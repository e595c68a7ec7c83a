// The worker's conversation: probe | peaks | eval (verify, then optionally time).
// Portable C++ with no dependency beyond nlohmann/json and xxhash, so the rvv backend can build
// it for riscv64 and link it with a candidate.
#include "mblast/runner/worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mblast/cache_evict.h"
#include "mblast/digest.h"
#include "mblast/protocol.h"
#include "mblast/safetensors.h"
#include "mblast/shared_payload.h"
#include "output_look.h"

namespace mblast::runner {

namespace {

using nlohmann::json;
using protocol::FailureKind;
using protocol::Message;

class CandidateFailure : public Error {
 public:
  CandidateFailure(FailureKind k, const std::string& what) : Error(what), kind(k) {}
  FailureKind kind;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// When this worker started, before any candidate code ran, by the coarse wall clock the kernel stamps
// file times with (the fine clock runs up to a tick ahead of it: a file written just after the start
// could carry an earlier time).
timespec g_worker_started{};

// Whether the library file PATH could be the candidate's own work: a file gone (a memfd, or one it
// unlinked after loading it) or one changed since the worker started. The libraries of drivers
// and runtimes were on disk before; a candidate can only bring code in a file it writes itself
// (adversarial case second_library_handler).
bool written_by_candidate(const char* path) {
  struct stat st {};
  if (!path || ::stat(path, &st) != 0) return true;
  const timespec& c = st.st_ctim;
  return c.tv_sec > g_worker_started.tv_sec ||
         (c.tv_sec == g_worker_started.tv_sec && c.tv_nsec >= g_worker_started.tv_nsec);
}

// A signal with a handler function, or 0. Under an instruction count (the call's instructions
// alone) a handler runs uncounted whenever its signal comes: a fault that the worker's checks
// take on output pages the call left protected, a timer's signal; it could do the call's work
// there. The worker sets none of its own (the rvv device's probe restores what it changed).
//
// Under a clock the same handler can do the call's work in the checks after it, and only the
// bound on the checks' time stands in its way, which a busy machine widens. So there too a
// handler whose code is the candidate's is refused: in the candidate's library (CANDIDATE_BASE,
// its load address), or in memory that no library maps (code it wrote). A driver's or runtime's
// own handlers (an LLVM inside an OpenCL driver installs some while it builds) live in their
// libraries and stay allowed; a library file written while the worker ran, or gone, is the
// candidate's. Null CANDIDATE_BASE: any handler at all.
int signal_with_handler(const void* candidate_base = nullptr) {
  // Under a clock only the faults a read of the outputs raises (a look at every signal after each
  // call cost milliseconds per call in the sandboxed worker, where each system call is slow).
  std::vector<int> signals;
  if (candidate_base)
    signals = {SIGSEGV, SIGBUS};
  else
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) signals.push_back(sig);
  for (const int sig : signals) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) != 0) continue;  // a number the system keeps for itself
    const bool function =
        (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != nullptr : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
    if (!function) continue;
    if (!candidate_base) return sig;
    const void* code = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<const void*>(sa.sa_sigaction)
                                                  : reinterpret_cast<const void*>(sa.sa_handler);
    Dl_info info{};
    if (::dladdr(code, &info) == 0 || info.dli_fbase == candidate_base || written_by_candidate(info.dli_fname))
      return sig;
  }
  return 0;
}

// Asynchronous signals held on the worker's thread from a timed call's return until its checks
// are done. A handler of the candidate's that a timer or another thread sets off would otherwise
// run on this thread inside the clock's synchronisation (clFinish, cuCtxSynchronize), where the
// device's clock does not see it: it could compute the outputs on the host and leave them
// complete before the checks (adversarial case timer_signal: accepted at a quarter of the naive
// candidate's time before this). Held, the signal goes to another thread, which races the
// checks' reads (output_look.h), or waits until the outputs were read. The faults an
// instruction raises stay deliverable: blocked, they kill the process.
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t held;
    sigfillset(&held);
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&held, sig);
    ::pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~HeldSignals() { ::pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t before_{};
};

// The load address of the library that holds FN (the candidate's entry point), or null.
const void* library_base(const void* fn) {
  Dl_info info{};
  return fn && ::dladdr(fn, &info) != 0 ? info.dli_fbase : nullptr;
}

std::vector<TensorSpec> specs_from(const json& j) {
  std::vector<TensorSpec> out;
  for (const auto& e : j) out.push_back(e.get<TensorSpec>());
  return out;
}

// Tensors of one kind (inputs, parameters or outputs) on the device.
struct BufferSet {
  std::vector<TensorSpec> specs;
  std::vector<Buffer> buffers;
  std::vector<mblast_tensor> abi;

  BufferSet(Device& dev, const std::vector<TensorSpec>& s) : specs(s) {
    for (const auto& spec : specs) buffers.push_back(dev.allocate(spec.nbytes()));
    for (size_t i = 0; i < specs.size(); ++i) {
      mblast_tensor t{};
      t.name = specs[i].name.c_str();
      t.dtype = static_cast<mblast_dtype>(specs[i].dtype);
      t.ndim = static_cast<int32_t>(specs[i].shape.size());
      for (size_t d = 0; d < specs[i].shape.size(); ++d) t.shape[d] = specs[i].shape[d];
      t.data = buffers[i].handle;
      t.nbytes = buffers[i].nbytes;
      abi.push_back(t);
    }
  }
  void release(Device& dev) {
    for (auto& b : buffers) dev.release(b);
    buffers.clear();
  }
  // Uploads the tensors named "<prefix><name>" from the payload.
  void upload(Device& dev, const TensorViews& payload, const std::string& prefix) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const TensorView* t = payload.find(prefix + specs[i].name);
      if (!t) throw Error("worker: payload lacks " + prefix + specs[i].name);
      if (t->data.size() != specs[i].nbytes()) throw Error("worker: payload size mismatch for " + specs[i].name);
      dev.upload(buffers[i], t->data);
    }
  }
  // Poisons every buffer and waits until that is done (Device::poison may only enqueue it): the
  // call that follows is ordered after it on any queue or stream, the candidate's own included.
  void poison(Device& dev, std::byte value) {
    for (auto& b : buffers) dev.poison(b, value);
    dev.synchronize();
  }
  // Downloads tensor i into its place in `l`, a layout made for these specs.
  void download_into(Device& dev, SafetensorsLayout& l) {
    for (size_t i = 0; i < specs.size(); ++i)
      dev.download(buffers[i], std::span(l.blob).subspan(l.offsets[i], specs[i].nbytes()));
  }
  // `scratch` is kept by the caller: one host buffer for every hash of a session.
  json hashes(Device& dev, std::vector<std::byte>& scratch) {
    json h = json::object();
    for (size_t i = 0; i < specs.size(); ++i) {
      if (scratch.size() < specs[i].nbytes()) scratch.resize(specs[i].nbytes());
      const std::span<std::byte> view = std::span(scratch).first(specs[i].nbytes());
      dev.download(buffers[i], view);
      h[specs[i].name] = content_hash_hex(view);
    }
    return h;
  }
  // Names the first tensor whose guard bytes changed, or "".
  std::string broken_guard(Device& dev) {
    for (size_t i = 0; i < specs.size(); ++i)
      if (!dev.guards_intact(buffers[i])) return specs[i].name;
    return "";
  }
};

// The verified inputs of two seeds, on the device and in the payload, from which each timed
// call's fresh inputs are mixed (mblast/digest.h): every input gets its own key from the call's.
class FreshInputs {
 public:
  FreshInputs(Device& dev, const std::vector<TensorSpec>& specs, const TensorViews& payload, const json& seeds)
      : dev_(dev), a_(dev, specs), b_(dev, specs) {
    const std::string pa = "in/" + std::to_string(seeds.at(0).get<int>()) + "/";
    const std::string pb = "in/" + std::to_string(seeds.at(1).get<int>()) + "/";
    a_.upload(dev, payload, pa);
    b_.upload(dev, payload, pb);
    for (const auto& s : specs) {
      host_a_.push_back(payload.find(pa + s.name)->data);
      host_b_.push_back(payload.find(pb + s.name)->data);
    }
  }
  void fill(BufferSet& dst, uint64_t key) {
    for (size_t x = 0; x < dst.specs.size(); ++x)
      dev_.mix(dst.buffers[x], a_.buffers[x], b_.buffers[x], host_a_[x], host_b_[x], dtype_size(dst.specs[x].dtype),
               key ^ splitmix64(x + 1));
  }
  void release() {
    a_.release(dev_);
    b_.release(dev_);
  }

 private:
  Device& dev_;
  BufferSet a_, b_;
  std::vector<std::span<const std::byte>> host_a_, host_b_;
};

// Called with each verification run's case and outputs; false: the driver wants no more runs.
using RunSink = std::function<bool(const json& run_case, std::span<const std::byte> outputs)>;

class Session {
 public:
  // PARAMS: the parameters of every init (the request's payload); the inputs come later.
  Session(Device& dev, const CandidateEntry& cand, const json& req, const TensorViews& params)
      : dev_(dev),
        cand_(cand),
        params_(params),
        ctx_(dev.context()),
        in_specs_(specs_from(req.at("inputs"))),
        par_specs_(specs_from(req.at("parameters"))),
        out_specs_(specs_from(req.at("outputs"))) {
    for (const auto& s : req.at("seeds")) seeds_.push_back(s.get<int>());
    for (const auto& i : req.at("inits")) inits_.push_back(i.get<int>());
    runs_ = req.value("runs", 2);
    all_inits_ = std::set<int>(inits_.begin(), inits_.end());
    for (const char* k : {"timing_init", "init"})
      if (req.contains(k)) all_inits_.insert(req[k].get<int>());
  }
  ~Session() {
    for (auto& [init, p] : prepared_) {
      release(p->state);
      p->par.release(dev_);
    }
  }

  // mblast_prepare for every init the session uses, on the parameters alone: no input is in
  // this process yet (include/mblast/abi.h). The states live until the session ends.
  void prepare_all() {
    for (int init : all_inits_) {
      auto p = std::make_unique<Prepared>(dev_, par_specs_);
      const double t0 = now_s();
      p->par.upload(dev_, params_, "par/" + std::to_string(init) + "/");
      const double t1 = now_s();
      p->state = prepare(p->par);
      dev_.synchronize();
      p->upload_s = t1 - t0;
      p->prepare_s = now_s() - t1;
      prepared_.emplace(init, std::move(p));
    }
  }
  // The inputs of every seed, once prepare_all() is done.
  void set_inputs(const TensorViews& inputs) { inputs_ = &inputs; }

  size_t run_count() const { return inits_.size() * seeds_.size() * static_cast<size_t>(std::max(runs_, 0)); }
  // After verify(): seconds per step of the runs (uploads, prepare, poisoning, the calls,
  // downloads, hashing the inputs, sending each run and waiting for the driver's word).
  const json& verify_steps() const { return steps_; }

  // Every init x seed x run, in that order (the runs of one seed and init are adjacent). Each
  // run's outputs go to `sink` as soon as the run is done (a safetensors blob of the outputs
  // under their own names, reused from run to run), so no more than one run's outputs are ever
  // held. Returns every case, or nullopt when the sink stopped the runs early.
  std::optional<json> verify(const RunSink& sink) {
    json cases = json::array();
    BufferSet in(dev_, in_specs_), out(dev_, out_specs_);
    SafetensorsLayout blob = layout_safetensors(out_specs_);
    std::vector<std::byte> scratch;
    bool stopped = false;
    // Where the runs' time goes (verify_steps): a slow verification says which step it is.
    double upload_s = 0, prepare_s = 0, poison_s = 0, call_s = 0, download_s = 0, hash_s = 0, send_s = 0;
    auto timed = [](double& acc, auto&& step) {
      const double t = now_s();
      step();
      acc += now_s() - t;
    };
    for (size_t ii = 0; ii < inits_.size() && !stopped; ++ii) {
      const int init = inits_[ii];
      Prepared& pp = prepared(init);
      BufferSet& par = pp.par;
      void* state = pp.state;
      upload_s += pp.upload_s;
      prepare_s += pp.prepare_s;
      for (size_t si = 0; si < seeds_.size() && !stopped; ++si) {
        const int seed = seeds_[si];
        timed(upload_s, [&] { in.upload(dev_, inputs(), "in/" + std::to_string(seed) + "/"); });
        for (int r = 0; r < runs_ && !stopped; ++r) {
          const std::byte poison = (r % 2 == 0) ? std::byte{0xFF} : std::byte{0x7F};
          timed(poison_s, [&] { out.poison(dev_, poison); });
          double t0 = now_s();
          call(state, in, par, out);
          dev_.synchronize();
          double t1 = now_s();
          call_s += t1 - t0;
          check_after_call(in, par, out);
          timed(download_s, [&] { out.download_into(dev_, blob); });
          // Hashed after every run: a candidate that changes its inputs and changes them back on
          // the next call (a swap done twice) is caught too.
          json hin, hpar;
          timed(hash_s, [&] {
            hin = in.hashes(dev_, scratch);
            hpar = par.hashes(dev_, scratch);
          });
          json c = {{"seed", seed},
                    {"init", init},
                    {"run", r},
                    {"seconds", t1 - t0},
                    {"poison", static_cast<int>(poison)},
                    {"input_hashes_after", std::move(hin)},
                    {"param_hashes_after", std::move(hpar)}};
          timed(send_s, [&] { stopped = !sink(c, blob.blob); });  // to the runner, and its word back
          cases.push_back(std::move(c));
        }
      }
    }
    steps_ = {{"upload_s", upload_s},     {"prepare_s", prepare_s},  {"poison_s", poison_s},     {"calls_s", call_s},
              {"download_s", download_s}, {"hash_inputs_s", hash_s}, {"send_and_word_s", send_s}};
    in.release(dev_);
    out.release(dev_);
    if (stopped) return std::nullopt;
    return cases;
  }

  // The timed stage, driven call by call by the runner (docs/measurement.md). After setting up
  // it says "timing_ready", then answers each of the runner's messages:
  //   {"op": "call", "i", "key", "poison", "timed"}: fresh inputs mixed from two verified seeds by
  //     the key, outputs poisoned, caches flushed (not for a deterministic cost), the call timed,
  //     then, outside the clock, the device checked and every output fingerprinted: "call_done".
  //   {"op": "report", "i"}: the outputs of call i (still in its rotating set) as "call_outputs".
  //   {"op": "end"}: releases everything; the stage's last message, "timing".
  // The runner holds the samples and decides when enough were taken: it sees each call's time
  // on its own clock, and which calls are checked is its secret until they have run.
  json time(const json& req, protocol::MessageReader& reader, int out_fd) {
    const int init = req.value("init", inits_.at(0));
    const int rotate = std::max(1, req.value("rotate", 4));
    const double t_setup = now_s();
    Prepared& pp = prepared(init);
    BufferSet& par = pp.par;
    void* state = pp.state;
    const double prepare_s = pp.prepare_s;
    FreshInputs fresh(dev_, in_specs_, inputs(), req.at("fresh_seeds"));
    std::vector<BufferSet> ins, outs;
    for (int k = 0; k < rotate; ++k) {
      ins.emplace_back(dev_, in_specs_);
      outs.emplace_back(dev_, out_specs_);
    }
    dev_.synchronize();
    const double setup_s = now_s() - t_setup;
    protocol::write_message(
        out_fd,
        {{"stage", "timing_ready"}, {"unit", dev_.timing_unit()}, {"setup_s", setup_s}, {"prepare_s", prepare_s}});

    SafetensorsLayout blob = layout_safetensors(out_specs_);
    std::vector<size_t> out_elem_bytes;
    for (const auto& s : out_specs_) out_elem_bytes.push_back(dtype_size(s.dtype));
    double mix_s = 0, flush_s = 0, digest_s = 0;
    size_t calls = 0;
    for (;;) {
      std::optional<Message> m = reader.read();
      if (!m) break;  // the runner went away or gave up on this worker
      const json& h = m->header;
      const std::string op = h.value("op", "");
      if (op == "call") {
        const size_t i = h.at("i").get<size_t>();
        const size_t k = i % static_cast<size_t>(rotate);
        const std::byte poison{static_cast<unsigned char>(h.value("poison", 0xFF))};
        const double c0 = now_s();
        fresh.fill(ins[k], h.at("key").get<uint64_t>());
        outs[k].poison(dev_, poison);  // it and the fresh inputs are in place before the call
        const double c1 = now_s();
        if (!deterministic()) dev_.flush_caches();
        const double c2 = now_s();
        dev_.timer_begin();
        call(state, ins[k], par, outs[k]);
        std::optional<HeldSignals> held(std::in_place);  // until the checks below are done
        const double sample = dev_.timer_end();
        const double c3 = now_s();
        // Before anything else reads them: a window of each output, read again after the checks
        // (output_look.h). Work that goes on after the return shows as bytes that changed.
        const std::vector<OutputWindow> look = look_at_outputs(dev_, outs[k].buffers);
        // Under a count any handler; under a clock the candidate's own (none to look for when its
        // library is unknown).
        const int sig = deterministic()   ? signal_with_handler()
                        : candidate_base_ ? signal_with_handler(candidate_base_)
                                          : 0;
        if (sig != 0)
          throw CandidateFailure(FailureKind::timing_inconsistent,
                                 "the candidate installed a handler for signal " + std::to_string(sig) + " (" +
                                     std::string(::strsignal(sig)) +
                                     "): it would run outside the call's count or clock, as when the checks "
                                     "after the call touch pages the call protected");
        const Device::OutputsCheck chk = dev_.check_outputs(outs[k].buffers, out_elem_bytes, poison);
        if (!chk.health.empty())
          throw CandidateFailure(FailureKind::launch_failed,
                                 "the device reported an error after the call: " + chk.health);
        if (chk.broken_guard >= 0)
          throw CandidateFailure(FailureKind::out_of_bounds_write,
                                 "wrote outside the buffer of '" +
                                     out_specs_[static_cast<size_t>(chk.broken_guard)].name +
                                     "' (guard bytes changed)");
        if (const int o = changed_output(dev_, outs[k].buffers, look); o >= 0)
          throw CandidateFailure(FailureKind::unwritten_output,
                                 "'" + out_specs_[static_cast<size_t>(o)].name +
                                     "' changed after the call had returned and the device was synchronised: work "
                                     "done after the clock stopped (by a thread or signal handler of the candidate's)");
        held.reset();  // a signal that came meanwhile is handled now, after the outputs were read
        json digests = json::array();
        for (const OutputDigest& d : chk.digests) digests.push_back({{"hash", d.hash}, {"poisoned", d.poisoned}});
        const double c4 = now_s();
        mix_s += c1 - c0;
        flush_s += c2 - c1;
        digest_s += c4 - c3;
        ++calls;
        std::fflush(stdout);
        protocol::write_message(out_fd, {{"stage", "call_done"},
                                         {"i", i},
                                         {"sample", sample},
                                         {"wall", c3 - c2},
                                         {"mix_s", c1 - c0},
                                         {"flush_s", c2 - c1},
                                         {"check_s", c4 - c3},
                                         {"outputs", std::move(digests)}});
      } else if (op == "report") {
        const size_t i = h.at("i").get<size_t>();
        outs[i % static_cast<size_t>(rotate)].download_into(dev_, blob);
        std::fflush(stdout);
        protocol::write_message(out_fd, {{"stage", "call_outputs"}, {"i", i}}, blob.blob);
      } else {
        break;  // "end", or anything else: the stage is over
      }
    }
    // The inputs' and parameters' guards once for the stage (each call checks its outputs').
    for (size_t k = 0; k < ins.size(); ++k) check_after_call(ins[k], par, outs[k]);
    for (auto& s : ins) s.release(dev_);
    for (auto& s : outs) s.release(dev_);
    fresh.release();
    return {{"stage", "timing"},
            {"init", init},
            {"prepare_seconds", prepare_s},
            {"method", dev_.timing_method()},
            {"unit", dev_.timing_unit()},
            {"worker_phases",
             {{"setup_s", setup_s},
              {"calls", calls},
              {"mix_and_poison_s", mix_s},
              {"flush_s", flush_s},
              {"check_s", digest_s}}}};
  }

  // The spot check, in a worker of its own that has seen none of the timed calls: the runner
  // gives it the keys of timed calls it chose after they ran; it runs the candidate once on each
  // of those inputs (untimed) and sends the outputs, which the runner compares with the timed
  // call's. A candidate whose timed calls did less than the work is seen, whatever history it keeps.
  void spot(const json& req, protocol::MessageReader& reader, int out_fd) {
    Prepared& pp = prepared(req.value("init", inits_.at(0)));
    BufferSet& par = pp.par;
    void* state = pp.state;
    protocol::write_message(out_fd, {{"stage", "spot_ready"}});
    std::optional<Message> m = reader.read();
    if (!m || m->header.value("op", "") != "spot_calls") return;
    FreshInputs fresh(dev_, in_specs_, inputs(), m->header.at("fresh_seeds"));
    BufferSet in(dev_, in_specs_), out(dev_, out_specs_);
    SafetensorsLayout blob = layout_safetensors(out_specs_);
    for (const auto& c : m->header.at("calls")) {
      fresh.fill(in, c.at("key").get<uint64_t>());
      out.poison(dev_, std::byte{static_cast<unsigned char>(c.value("poison", 0xFF))});
      call(state, in, par, out);
      dev_.synchronize();
      check_after_call(in, par, out);
      out.download_into(dev_, blob);
      std::fflush(stdout);
      protocol::write_message(out_fd, {{"stage", "spot_outputs"}, {"i", c.at("i")}}, blob.blob);
    }
    in.release(dev_);
    out.release(dev_);
    fresh.release();
  }

 private:
  // One init's parameters on the device and the state mblast_prepare made of them.
  struct Prepared {
    Prepared(Device& dev, const std::vector<TensorSpec>& specs) : par(dev, specs) {}
    BufferSet par;
    void* state = nullptr;
    double upload_s = 0, prepare_s = 0;
  };
  Prepared& prepared(int init) {
    auto it = prepared_.find(init);
    if (it == prepared_.end()) throw Error("worker: init " + std::to_string(init) + " was not prepared");
    return *it->second;
  }
  const TensorViews& inputs() const {
    if (!inputs_) throw Error("worker: the inputs have not come");
    return *inputs_;
  }
  // A deterministic cost (an instruction count) needs no cold caches and no repetition.
  bool deterministic() { return dev_.timing_unit() != "s"; }
  std::string last_error() {
    if (!cand_.last_error) return "";
    const char* e = cand_.last_error();
    return e ? std::string(": ") + e : "";
  }
  void* prepare(BufferSet& par) {
    void* state = nullptr;
    if (!cand_.prepare) return state;
    int rc = cand_.prepare(&ctx_, par.abi.data(), static_cast<int32_t>(par.abi.size()), &state);
    if (rc != 0)
      throw CandidateFailure(FailureKind::launch_failed,
                             "mblast_prepare returned " + std::to_string(rc) + last_error());
    return state;
  }
  void release(void* state) {
    if (cand_.release) cand_.release(&ctx_, state);
  }
  void call(void* state, BufferSet& in, BufferSet& par, BufferSet& out) {
    int rc = cand_.run(&ctx_, state, in.abi.data(), static_cast<int32_t>(in.abi.size()), par.abi.data(),
                       static_cast<int32_t>(par.abi.size()), out.abi.data(), static_cast<int32_t>(out.abi.size()));
    if (rc != 0)
      throw CandidateFailure(FailureKind::launch_failed, "mblast_run returned " + std::to_string(rc) + last_error());
  }
  void check_after_call(BufferSet& in, BufferSet& par, BufferSet& out) {
    std::string h = dev_.health();
    if (!h.empty())
      throw CandidateFailure(FailureKind::launch_failed, "the device reported an error after the call: " + h);
    for (BufferSet* s : {&out, &in, &par}) {
      std::string name = s->broken_guard(dev_);
      if (!name.empty())
        throw CandidateFailure(FailureKind::out_of_bounds_write,
                               "wrote outside the buffer of '" + name + "' (guard bytes changed)");
    }
  }

  Device& dev_;
  const CandidateEntry& cand_;
  const void* candidate_base_ = library_base(reinterpret_cast<const void*>(cand_.run));
  const TensorViews& params_;
  const TensorViews* inputs_ = nullptr;
  std::set<int> all_inits_;
  std::map<int, std::unique_ptr<Prepared>> prepared_;
  mblast_context ctx_;
  std::vector<TensorSpec> in_specs_, par_specs_, out_specs_;
  std::vector<int> seeds_, inits_;
  json steps_ = json::object();  // verify_steps()
  int runs_ = 2;
};

void send_failure(int fd, FailureKind kind, const std::string& reason, const std::string& stage) {
  std::fflush(stdout);
  std::fflush(stderr);
  protocol::write_message(fd, {{"stage", "failed"},
                               {"failed_stage", stage},
                               {"failure_kind", protocol::failure_kind_name(kind)},
                               {"reason", reason}});
}

}  // namespace

json to_json(const Peaks& p) {
  json j = {{"bandwidth_bytes_per_s", p.bandwidth_bytes_per_s},
            {"fp32_flops_per_s", p.fp32_flops_per_s},
            {"method", p.method}};
  if (p.tf32_flops_per_s > 0) j["tf32_flops_per_s"] = p.tf32_flops_per_s;
  if (p.bf16_flops_per_s > 0) j["bf16_flops_per_s"] = p.bf16_flops_per_s;
  return j;
}

namespace {
AfterOpenHook g_after_open = nullptr;

double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The worker's checks after a timed call, on one output: a first look, the checks, a second look.
void check_once(Device& dev, const Buffer& out) {
  const size_t four = 4;
  Buffer b = out;
  const std::vector<OutputWindow> look = look_at_outputs(dev, std::span(&b, 1));
  (void)dev.check_outputs(std::span(&b, 1), std::span(&four, 1), std::byte{0xFF});
  (void)changed_output(dev, std::span(&b, 1), look);
}

// What the per-call work around a timed call costs on this device, measured with no candidate
// loaded (a peaks request): the runner bounds a worker's own accounts of that work by these, so
// a call's time cannot hide in them (docs/measurement.md, "the runner's clock").
json measure_check_costs(Device& dev) {
  constexpr size_t kBytes = size_t{16} << 20, kSmall = 4096;
  std::vector<std::byte> host_a(kBytes, std::byte{1}), host_b(kBytes, std::byte{2});
  Buffer a = dev.allocate(kBytes), b = dev.allocate(kBytes), d = dev.allocate(kBytes);
  dev.upload(a, host_a);
  dev.upload(b, host_b);
  std::vector<double> flush, mix, digest, mix_small, check_small;
  Buffer sa = dev.allocate(kSmall), sb = dev.allocate(kSmall), sd = dev.allocate(kSmall);
  dev.upload(sa, std::span(host_a).first(kSmall));
  dev.upload(sb, std::span(host_b).first(kSmall));
  for (int r = 0; r < 5; ++r) {
    double t = now_s();
    if (dev.timing_unit() == "s") dev.flush_caches();
    flush.push_back(now_s() - t);
    t = now_s();
    dev.mix(d, a, b, host_a, host_b, 4, static_cast<uint64_t>(r) + 1);
    dev.poison(d, std::byte{0xFF});
    dev.synchronize();
    mix.push_back(now_s() - t);
    t = now_s();
    check_once(dev, d);
    digest.push_back(now_s() - t);
    // The same on a small buffer: the fixed cost per buffer.
    t = now_s();
    dev.mix(sd, sa, sb, std::span(host_a).first(kSmall), std::span(host_b).first(kSmall), 4,
            static_cast<uint64_t>(r) + 1);
    dev.poison(sd, std::byte{0xFF});
    dev.synchronize();
    mix_small.push_back(now_s() - t);
    t = now_s();
    check_once(dev, sd);
    check_small.push_back(now_s() - t);
  }
  for (Buffer* x : {&a, &b, &d, &sa, &sb, &sd}) dev.release(*x);
  return {{"flush_s", median3(flush)},
          {"mix_and_poison_bytes_per_s", static_cast<double>(kBytes) / std::max(median3(mix), 1e-9)},
          {"digest_bytes_per_s", static_cast<double>(kBytes) / std::max(median3(digest), 1e-9)},
          {"mix_and_poison_latency_s", median3(mix_small)},
          {"check_latency_s", median3(check_small)}};
}
}  // namespace

void set_after_open_hook(AfterOpenHook hook) { g_after_open = hook; }

int worker_main(int in_fd, int out_fd, Backend& backend, const CandidateEntry* linked) {
  ::clock_gettime(CLOCK_REALTIME_COARSE, &g_worker_started);
  protocol::MessageReader reader(in_fd);
  std::optional<Message> req;
  try {
    req = reader.read();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mblast worker: %s\n", e.what());
    return 3;
  }
  if (!req) return 3;
  const json& h = req->header;
  const std::string op = h.value("op", "");
  std::string stage = "open";
  const double t_open = now_s();
  try {
    std::unique_ptr<Device> dev;
    try {
      dev = backend.open(h.at("target"));
    } catch (const Error& e) {
      send_failure(out_fd, FailureKind::unavailable, e.what(), stage);
      return 0;
    }
    if (op == "probe") {
      protocol::write_message(out_fd, {{"stage", "probe"}, {"available", true}, {"device", dev->describe()}});
      return 0;
    }
    if (op == "peaks") {
      stage = "peaks";
      json msg = to_json(dev->measure_peaks());
      msg["checks"] = measure_check_costs(*dev);
      msg["stage"] = "peaks";
      msg["device"] = dev->describe();
      protocol::write_message(out_fd, msg);
      return 0;
    }
    if (op == "checks") {  // the costs alone, again (timed_loop.h: costs_now)
      stage = "checks";
      protocol::write_message(out_fd, {{"stage", "checks"}, {"checks", measure_check_costs(*dev)}});
      return 0;
    }
    if (op != "eval" && op != "spot") {
      send_failure(out_fd, FailureKind::runner_error, "worker: unknown op '" + op + "'", stage);
      return 0;
    }
    const double open_s = now_s() - t_open;
    // The GPU driver is initialised: now restrict the filesystem, before any candidate code.
    if (h.contains("worker_landlock")) {
      std::string err = g_after_open ? g_after_open(h["worker_landlock"]) : "this worker cannot apply a sandbox itself";
      if (!err.empty()) {
        send_failure(out_fd, FailureKind::runner_error, "worker: " + err, stage);
        return 0;
      }
    }
    stage = "load";
    CandidateEntry cand;
    if (linked) {
      cand = *linked;
    } else {
      try {
        cand = load_candidate_library(h.at("artifact").get<std::string>());
      } catch (const Error& e) {
        send_failure(out_fd, FailureKind::abi_error, e.what(), stage);
        return 0;
      }
    }
    if (!cand.run) {
      send_failure(out_fd, FailureKind::abi_error,
                   "the candidate does not define mblast_run (see include/mblast/abi.h)", stage);
      return 0;
    }
    // The request's payload holds the parameters alone: mblast_prepare runs on them before any
    // input is in this process. Then the inputs come: a shared memory file whose fd arrives on
    // the inputs channel (a local runner: mblast/shared_payload.h), mapped read-only, or a
    // message. Either outlives the session.
    const TensorViews params = view_safetensors(req->payload);
    skip_in_eviction(req->payload);  // only uploaded from: a cache flush need not walk it
    Session session(*dev, cand, h, params);
    stage = "prepare";
    const double t_verify = now_s();  // the verification's time includes preparing (verify_steps)
    session.prepare_all();
    std::fflush(stdout);
    protocol::write_message(out_fd, {{"stage", "prepared"}});
    stage = "request";
    std::optional<MappedPayload> shared;
    std::optional<Message> inputs_message;
    if (h.contains("shared_payload")) {
      shared.emplace(receive_fd(kInputsChannelFd), h["shared_payload"].value("bytes", size_t{0}));
    } else {
      inputs_message = reader.read();
      if (!inputs_message || inputs_message->header.value("op", "") != "inputs") return 0;  // the runner gave up
    }
    ::close(kInputsChannelFd);
    const std::span<const std::byte> payload_bytes =
        shared ? shared->bytes() : std::span<const std::byte>(inputs_message->payload);
    const TensorViews payload = view_safetensors(payload_bytes);
    skip_in_eviction(payload_bytes);
    session.set_inputs(payload);
    if (op == "spot") {
      stage = "spot";
      session.spot(h, reader, out_fd);
      return 0;
    }
    stage = "verify";
    const json device = dev->describe();
    size_t index = 0;
    const size_t of = session.run_count();
    // One message per run, then the driver's word before the next run: a wrong output stops
    // the runs at once, and the driver checks one run while the next one runs.
    auto sink = [&](const json& c, std::span<const std::byte> outputs) {
      std::fflush(stdout);
      protocol::write_message(
          out_fd, {{"stage", "verify_run"}, {"case", c}, {"index", index++}, {"of", of}, {"device", device}}, outputs);
      auto answer = reader.read();
      return answer && answer->header.value("op", "") == "continue";
    };
    std::optional<json> cases = session.verify(sink);
    if (!cases) return 0;  // the driver stopped the runs
    const double verify_s = now_s() - t_verify;
    std::fflush(stdout);
    protocol::write_message(
        out_fd, {{"stage", "verify"},
                 {"cases", *cases},
                 {"device", device},
                 {"worker_phases",
                  {{"device_open_s", open_s}, {"verify_runs_s", verify_s}, {"verify_steps", session.verify_steps()}}}});
    auto next = reader.read();
    if (!next || next->header.value("op", "") != "time") return 0;
    stage = "timing";
    json timing = session.time(next->header, reader, out_fd);
    std::fflush(stdout);
    protocol::write_message(out_fd, timing);
    return 0;
  } catch (const CandidateFailure& e) {
    send_failure(out_fd, e.kind, e.what(), stage);
  } catch (const BackendError& e) {
    send_failure(out_fd, FailureKind::launch_failed, e.what(), stage);
  } catch (const std::exception& e) {
    send_failure(out_fd, FailureKind::runner_error, std::string("worker: ") + e.what(), stage);
  }
  return 0;
}

}  // namespace mblast::runner
