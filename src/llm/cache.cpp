#include "mblast/llm/cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>
#include <span>
#include <sstream>

#include "mblast/error.h"
#include "mblast/llm/client.h"
#include "mblast/tensor.h"

namespace mblast::llm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kFormat = 1;

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_all(int fd, const std::string& data, const fs::path& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("LLM cache: cannot write " + path.string() + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

json cache_material(const ProviderSpec& provider, const Request& request) {
  json messages = json::array();
  for (const Message& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json material = {{"kind", provider.kind},
                   {"base_url", provider.base_url},
                   {"model", provider.model},
                   {"max_tokens", request.max_tokens},
                   {"temperature", request.temperature},
                   {"messages", std::move(messages)}};
  if (request.sample != 0) material["sample"] = request.sample;
  return material;
}

std::string cache_key(const ProviderSpec& provider, const Request& request) {
  const std::string canonical = cache_material(provider, request).dump();  // keys sorted
  return content_hash_hex(std::as_bytes(std::span(canonical.data(), canonical.size())));
}

json replay_material(const json& material) {
  // Measured figures: decimals, and numbers with a unit of time, rate, share or speedup.
  static const std::regex decimal(R"(\b[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?)");
  static const std::regex with_unit(R"(\b[0-9]+(?:[eE][-+]?[0-9]+)?(?=\s?(?:(?:ns|us|ms|s|GB/s|GFLOP/s|x)\b|%)))");
  // A time's unit follows its size (199 us, 2.24 ms): masked with it.
  static const std::regex time_unit(R"(#\s?(?:ns|us|ms|s)\b)");
  // And the words drawn from them by a threshold: the bottleneck class (classify_bottleneck in
  // src/kb/signature.cpp) and the critic's verdict and gap (src/loop/critic.cpp). Two runs on a
  // timed target land on either side of a threshold as easily as they differ in a digit.
  static const std::regex bound(R"(\b(?:latency|memory|compute|balanced)-bound\b)");
  static const std::regex bottleneck(
      R"(\bbottleneck (?:latency|memory|compute|balanced) -> (?:latency|memory|compute|balanced)\b)");
  static const std::regex verdict(R"(#x (?:faster|slower)\b|no clear change \(#x, within noise\))");
  static const std::regex gap(
      R"(at #% of peak: little left to gain|remaining gap: both fractions low \(#% of peak\) - launch overhead, too )"
      R"(little parallelism or serial dependences|remaining gap: #% of peak, still #-bound)");
  json m = material;
  for (auto& msg : m["messages"])
    if (msg.contains("content") && msg["content"].is_string()) {
      std::string t = std::regex_replace(msg["content"].get<std::string>(), decimal, "#");
      t = std::regex_replace(t, with_unit, "#");
      t = std::regex_replace(t, time_unit, "# t");
      t = std::regex_replace(t, bound, "#-bound");
      t = std::regex_replace(t, bottleneck, "bottleneck # -> #");
      t = std::regex_replace(t, verdict, "#verdict");
      msg["content"] = std::regex_replace(t, gap, "#gap");
    }
  m["replay_key"] = true;  // never equal to an exact key's material
  return m;
}

std::string replay_key(const json& replay_material) {
  const std::string canonical = replay_material.dump();
  return content_hash_hex(std::as_bytes(std::span(canonical.data(), canonical.size())));
}

ResponseCache::ResponseCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path ResponseCache::path_for(const std::string& key) const { return dir_ / key.substr(0, 2) / (key + ".json"); }

std::optional<CachedAnswer> ResponseCache::load(const std::string& key, const json& material, std::string* why) const {
  const fs::path path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const auto miss = [&](const std::string& reason) -> std::optional<CachedAnswer> {
    if (why) *why = path.string() + ": " + reason;
    return std::nullopt;
  };
  json doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::exception&) {
    return miss("not valid JSON");
  }
  try {
    if (!doc.is_object() || doc.value("format", 0) != kFormat) return miss("unknown format");
    if (doc.value("request", json()) != material) return miss("stored for a different request");
    const json& r = doc.at("response");
    CachedAnswer a;
    a.text = r.at("text").get<std::string>();
    a.model = r.value("model", "");
    a.finish_reason = r.value("finish_reason", "");
    a.input_tokens = r.value("input_tokens", 0LL);
    a.output_tokens = r.value("output_tokens", 0LL);
    return a;
  } catch (const json::exception&) {
    return miss("a field is missing or has the wrong type");
  }
}

void ResponseCache::store(const std::string& key, const json& material, const CachedAnswer& answer) const {
  const fs::path path = path_for(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("LLM cache: cannot create " + path.parent_path().string() + ": " + ec.message());
  const json doc = {{"format", kFormat},
                    {"key", key},
                    {"created_at", utc_now()},
                    {"request", material},
                    {"response",
                     {{"text", answer.text},
                      {"model", answer.model},
                      {"finish_reason", answer.finish_reason},
                      {"input_tokens", answer.input_tokens},
                      {"output_tokens", answer.output_tokens}}}};
  static std::atomic<unsigned> counter{0};
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("LLM cache: cannot create " + tmp.string() + ": " + std::strerror(errno));
  try {
    write_all(fd, doc.dump(2) + "\n", tmp);
    if (::fsync(fd) != 0) throw Error("LLM cache: cannot sync " + tmp.string() + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("LLM cache: cannot rename to " + path.string() + ": " + std::strerror(err));
  }
}

}  // namespace mblast::llm
