// Run folders (include/mblast/loop/run_store.h).
#include "mblast/loop/run_store.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/records.h"

namespace fs = std::filesystem;

namespace mblast::loop {

namespace {

std::string new_run_id() {
  std::string t = kb::utc_now_iso();  // 2025-01-31T12:34:56.789Z
  std::string compact;
  for (char c : t.substr(0, 19))
    if (std::isdigit(static_cast<unsigned char>(c))) compact += c;
  return compact.substr(0, 8) + "-" + compact.substr(8) + "-" + kb::random_id().substr(0, 6);
}

}  // namespace

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

bool run_process_gone(const nlohmann::json& meta) {
  if (meta.value("status", "") != "running") return false;
  const long pid = meta.value("pid", 0L);
  // A run from another host (a shared runs folder) cannot be checked from here.
  if (pid <= 0 || meta.value("host", std::string()) != this_host()) return false;
  if (pid == static_cast<long>(::getpid())) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

RunStore::RunStore(fs::path dir, std::string id, nlohmann::json meta)
    : dir_(std::move(dir)), id_(std::move(id)), meta_(std::move(meta)) {}

RunStore RunStore::create(const fs::path& root, const nlohmann::json& meta) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::string id = new_run_id();
    fs::path dir = root / id;
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw UserError(fmt::format("cannot create the runs folder {}: {}", root.string(), ec.message()));
    if (!fs::create_directory(dir, ec)) {
      if (ec) throw UserError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
      continue;  // taken
    }
    RunStore s(dir, id, meta);
    s.meta_["id"] = id;
    s.save_meta();
    return s;
  }
  throw Error("cannot find a free run id under " + root.string());
}

RunStore RunStore::open(const fs::path& root, const std::string& id) {
  fs::path dir = root / id;
  if (id.empty() || id.find('/') != std::string::npos || !fs::exists(dir / "run.json"))
    throw UserError(fmt::format("no run {} under {} (see `mblast runs list`)", id, root.string()));
  nlohmann::json meta = nlohmann::json::parse(try_read_file(dir / "run.json").value_or(""), nullptr, false);
  if (meta.is_discarded() || !meta.is_object())
    throw UserError(fmt::format("{} is damaged (not JSON)", (dir / "run.json").string()));
  return RunStore(dir, id, std::move(meta));
}

void RunStore::save_meta() { write_file_atomically(dir_ / "run.json", meta_.dump(2) + "\n"); }

void RunStore::append_event(const nlohmann::json& e) {
  std::string line = e.dump() + "\n";
  fs::path f = dir_ / "events.jsonl";
  int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot append to {}: {}", f.string(), std::strerror(errno)));
  ssize_t n = ::write(fd, line.data(), line.size());
  ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) throw Error("cannot append to " + f.string());
}

std::vector<nlohmann::json> RunStore::events() const {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir_ / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

fs::path RunStore::candidate_path(const std::string& id, const std::string& extension) const {
  return dir_ / "candidates" / (id + extension);
}

fs::path RunStore::save_candidate(const std::string& id, const std::string& extension, const std::string& source) {
  fs::path f = candidate_path(id, extension);
  if (!fs::exists(f)) write_file_atomically(f, source);
  return f;
}

std::vector<nlohmann::json> list_runs(const fs::path& root) {
  std::vector<nlohmann::json> runs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    auto j = nlohmann::json::parse(try_read_file(e.path() / "run.json").value_or(""), nullptr, false);
    if (!j.is_object()) continue;
    if (run_process_gone(j)) {
      // Its process was killed or crashed before the end: the run is failed, and stays so on
      // disk (a later --resume sets it running again).
      j["status"] = "failed";
      j["failure"] = "the run's process ended before the run did (killed or crashed)";
      try {
        write_file_atomically(e.path() / "run.json", j.dump(2) + "\n");
      } catch (const std::exception&) {
        // a read-only runs folder: shown as failed, left as it is
      }
    }
    runs.push_back(std::move(j));
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.value("id", "") > b.value("id", ""); });
  return runs;
}

}  // namespace mblast::loop
