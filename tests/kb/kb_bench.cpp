// mblast_kb_bench: the knowledge-base figures of docs/knowledge-base.md.
//   - KB size per 10k experiences (each with its candidate source, run and critic text),
//   - retrieval latency (ranked_actions, k = 32) with 100k experiences: median and p90,
//   - write throughput with 8 concurrent writer processes (one experience, with its state,
//     candidate and run, per transaction).
// Usage: mblast_kb_bench [--experiences N] [--dir PATH] [--writers W] [--per-writer M] [--retrieval-only]
//                        [--kb postgresql://USER@HOST/DB]
//   --kb: a PostgreSQL KB instead of DIR/bench.sqlite; it must be an empty database (sizes are the
//   database's, pg_database_size).
//   --retrieval-only: reuse DIR/bench.sqlite from an earlier run; time retrieval only.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/kb/knowledge_base.h"
#include "mblast/kb/seed.h"

namespace fs = std::filesystem;
using namespace mblast::kb;
using Clock = std::chrono::steady_clock;

namespace {

struct TargetInfo {
  const char* name;
  const char* backend;
  const char* arch;
};
const TargetInfo kTargets[] = {{"h100", "cuda", "sm_90"},
                               {"a100", "cuda", "sm_80"},
                               {"b200", "cuda", "sm_100"},
                               {"l40s", "cuda", "sm_89"},
                               {"adreno-740", "opencl", "adreno-a7xx"},
                               {"pocl-cpu", "opencl", "generic"},
                               {"rvv-qemu-256", "rvv", "rv64gcv-vlen256"},
                               {"spacemit-k1", "rvv", "rv64gcv_zvfh-vlen256"}};
const char* kOps[] = {"elementwise", "softmax", "norm", "reduction", "matmul", "conv", "attention", "transpose"};
const char* kBottlenecks[] = {"memory", "compute", "latency", "balanced"};

StateSignature random_signature(std::mt19937_64& rng, const TargetInfo& t) {
  std::uniform_real_distribution<double> u(0, 1);
  StateSignature s;
  s.backend = t.backend;
  s.arch = t.arch;
  s.target = t.name;
  s.op_class = kOps[rng() % 8];
  s.bottleneck = kBottlenecks[rng() % 4];
  s.arithmetic_intensity = std::pow(10.0, -1.5 + 4 * u(rng));
  s.bandwidth_fraction = u(rng);
  s.compute_fraction = u(rng);
  s.utilisation = u(rng);
  return s;
}

std::string filler(std::mt19937_64& rng, size_t n) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz ;{}()=+*[]0123456789\n";
  std::string s(n, ' ');
  for (auto& c : s) c = alphabet[rng() % (sizeof alphabet - 1)];
  return s;
}

// One loop step as the loop would record it: candidate, run, state, experience.
void record_one(KnowledgeBase& kb, std::mt19937_64& rng,
                const std::vector<std::vector<std::string>>& actions_by_backend, const std::string& state_id,
                const TargetInfo& t) {
  CandidateRecord c;
  c.backend = t.backend;
  c.source = filler(rng, 1500);
  c.provenance = {"learned", "bench"};
  const auto cand = kb.add_candidate(c);
  RunRecord r;
  r.candidate_id = cand;
  r.target = t.name;
  r.correct = rng() % 5 != 0;
  if (!r.correct) r.failure_kind = "wrong_output";
  r.median_s = 1e-5;
  r.bandwidth_fraction = 0.5;
  r.build_log = rng() % 10 == 0 ? filler(rng, 400) : "";
  r.result = {{"median_s", 1e-5}};
  r.provenance = {"learned", "bench"};
  const auto run = kb.add_run(r);
  const int b = std::string(t.backend) == "cuda" ? 0 : std::string(t.backend) == "opencl" ? 1 : 2;
  const auto& acts = actions_by_backend[static_cast<size_t>(b)];
  ExperienceRecord e;
  e.state_id = state_id;
  e.action_id = acts[rng() % acts.size()];
  e.target = t.name;
  e.candidate_id = cand;
  e.run_id = run;
  e.correct = r.correct;
  e.failure_kind = r.failure_kind;
  if (e.correct) e.speedup = std::exp(std::normal_distribution<double>(0.05, 0.3)(rng));
  e.critic_text = filler(rng, 300);
  e.model = "bench-model";
  e.prompt_hash = "0123456789abcdef";
  e.provenance = {"learned", "bench"};
  kb.add_experience(e);
}

uint64_t kb_bytes(KnowledgeBase& kb) {
  if (kb.db().is_postgresql())
    return static_cast<uint64_t>(kb.db().query_int("SELECT pg_database_size(current_database())"));
  kb.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return fs::file_size(kb.file());
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 100000, writers = 8, per_writer = 200;
  bool retrieval_only = false;
  fs::path dir = fs::temp_directory_path() / ("mblast-kb-bench-" + std::to_string(getpid()));
  std::string url;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--retrieval-only")) retrieval_only = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--experiences"))
      n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--writers"))
      writers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--per-writer"))
      per_writer = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kb"))
      url = argv[i + 1];
  }
  fs::create_directories(dir);
  const fs::path file = url.empty() ? dir / "bench.sqlite" : fs::path(url);
  if (!retrieval_only && url.empty()) fs::remove(file);
  nlohmann::json report;
  std::mt19937_64 rng(1234);
  std::vector<std::vector<std::string>> actions(3);
  {
    KnowledgeBase kb(file);
    const auto seed = embedded_seed();
    if (!retrieval_only) load_seed(kb, seed);
    for (const auto& e : seed) {
      const auto& b = e.action.backends.front();
      actions[b == "cuda" ? 0 : b == "opencl" ? 1 : 2].push_back(e.action.id);
    }
    for (const auto& t : kTargets) {
      if (retrieval_only) break;
      TargetRecord r;
      r.name = t.name;
      r.backend = t.backend;
      r.arch = t.arch;
      r.provenance = {"learned", "bench"};
      kb.add_target(r);
    }
    const uint64_t empty_bytes = kb_bytes(kb);
    // Population: 4 experiences per state, 1000 per transaction (a bulk import's pace).
    std::vector<uint64_t> sizes;
    const auto t0 = Clock::now();
    std::string state;
    const TargetInfo* tgt = nullptr;
    for (int i = retrieval_only ? n : 0; i < n;) {
      Transaction tx(kb.db());
      for (int j = 0; j < 1000 && i < n; ++j, ++i) {
        if (i % 4 == 0) {
          tgt = &kTargets[rng() % 8];
          StateRecord s;
          s.signature = random_signature(rng, *tgt);
          s.text = filler(rng, 120);
          s.provenance = {"learned", "bench"};
          state = kb.add_state(s);
        }
        record_one(kb, rng, actions, state, *tgt);
      }
      tx.commit();
      if (i % 10000 == 0) sizes.push_back(kb_bytes(kb));
    }
    const double populate_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (retrieval_only) n = static_cast<int>(kb.db().query_int("SELECT count(*) FROM experiences"));
    const uint64_t full = kb_bytes(kb);
    report["experiences"] = n;
    report["seed_only_bytes"] = empty_bytes;
    report["bytes"] = full;
    report["bytes_per_10k_experiences"] = (full - empty_bytes) * 10000.0 / n;
    report["bulk_insert_experiences_per_s"] = n / populate_s;
    std::printf("populated %d experiences (%d states) in %.1f s: %.1f MB, %.2f MB per 10k experiences\n", n, n / 4,
                populate_s, full / 1e6, (full - empty_bytes) * 1e4 / n / 1e6);

    // The first query of a process loads the signature index; later ones refresh it.
    RetrievalOptions o;
    {
      KnowledgeBase fresh(file);
      const auto a = Clock::now();
      (void)fresh.ranked_actions(random_signature(rng, kTargets[0]), o);
      const double first = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
      report["first_query_ms"] = first;
      std::printf("first ranked_actions of a process (loads the state index): %.1f ms\n", first);
    }
    // Retrieval latency on a warm connection, random queries over all targets.
    std::vector<double> ms;
    for (int q = 0; q < 200; ++q) {
      const auto& t = kTargets[rng() % 8];
      const auto sig = random_signature(rng, t);
      const auto a = Clock::now();
      const auto ranked = kb.ranked_actions(sig, o);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
      if (ranked.empty()) std::printf("warning: empty ranking\n");
    }
    report["retrieval_ms"] = {{"median", percentile(ms, 0.5)}, {"p90", percentile(ms, 0.9)}, {"queries", ms.size()}};
    std::printf("ranked_actions with %d experiences: median %.2f ms, p90 %.2f ms (200 queries, k = %d)\n", n,
                percentile(ms, 0.5), percentile(ms, 0.9), o.k);
    std::vector<double> near_ms;
    for (int q = 0; q < 100; ++q) {
      const auto sig = random_signature(rng, kTargets[rng() % 8]);
      const auto a = Clock::now();
      (void)kb.nearest_states(sig, 32, o);
      near_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    }
    report["nearest_states_ms"] = {{"median", percentile(near_ms, 0.5)}};
    std::printf("nearest_states over %d states: median %.2f ms\n", n / 4, percentile(near_ms, 0.5));
  }
  if (retrieval_only) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }

  // Write throughput: W processes, each recording per_writer loop steps, one transaction each.
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  for (int w = 0; w < writers; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        OpenOptions oo;
        oo.busy_timeout_ms = 120000;
        KnowledgeBase kb(file, oo);
        std::mt19937_64 r(static_cast<uint64_t>(w) * 7919 + 1);
        for (int i = 0; i < per_writer; ++i) {
          Transaction tx(kb.db());
          const auto& t = kTargets[r() % 8];
          StateRecord s;
          s.signature = random_signature(r, t);
          s.provenance = {"learned", "bench"};
          const auto st = kb.add_state(s);
          record_one(kb, r, actions, st, t);
          tx.commit();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  KnowledgeBase kb(file);
  const int64_t total = kb.db().query_int("SELECT count(*) FROM experiences");
  report["concurrent_writes"] = {{"writers", writers},
                                 {"experiences", writers * per_writer},
                                 {"seconds", secs},
                                 {"experiences_per_s", writers * per_writer / secs},
                                 {"all_present", total == n + writers * per_writer},
                                 {"writers_ok", ok}};
  std::printf("%d concurrent writers x %d transactions: %.1f s, %.0f experiences/s, all present: %s\n", writers,
              per_writer, secs, writers * per_writer / secs, total == n + writers * per_writer ? "yes" : "NO");
  std::printf("%s\n", report.dump(2).c_str());
  return ok && total == n + writers * per_writer ? 0 : 1;
}
