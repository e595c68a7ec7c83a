// The response cache: one JSON file per answered request, named by a content hash of what
// determines the answer. It makes runs reproducible (replay) and repeated prompts free.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mblast/llm/provider.h"

namespace mblast::llm {

struct Request;

enum class CacheMode {
  normal,  // read, and write every new answer
  replay,  // read only; a miss is an error (no network at all)
  off,     // neither read nor write
};

// The hashed material: provider kind, base URL, model, messages, max_tokens, temperature (and
// the sample index when non-zero). Never the API key, never the purpose.
nlohmann::json cache_material(const ProviderSpec& provider, const Request& request);
// 32 hex digits (xxh3-128 of the material's canonical JSON).
std::string cache_key(const ProviderSpec& provider, const Request& request);
// The material with its measured figures (decimals; numbers with a unit such as us, ms, GB/s,
// %, x) masked, and its key: every answer is stored under it too, and --replay falls back to it
// when the exact prompt is not there, so a run on a timed target (whose prompts carry times that
// differ from one run to the next) can be replayed. A normal run never reads it.
nlohmann::json replay_material(const nlohmann::json& material);
std::string replay_key(const nlohmann::json& replay_material);

struct CachedAnswer {
  std::string text, model, finish_reason;
  long long input_tokens = 0, output_tokens = 0;  // what the original call used
};

// Files live at DIR/<first two hex digits>/<key>.json and hold {"format", "key", "request"
// (the material), "response", "created_at"}. Writes are atomic (temporary file, fsync,
// rename), so concurrent writers and crashes leave either no entry or a whole one.
class ResponseCache {
 public:
  explicit ResponseCache(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path_for(const std::string& key) const;

  // nullopt on a miss. An entry that is unreadable or was stored for different material (a
  // hash collision) counts as a miss; *why then says so.
  std::optional<CachedAnswer> load(const std::string& key, const nlohmann::json& material,
                                   std::string* why = nullptr) const;
  // Throws Error when the entry cannot be written.
  void store(const std::string& key, const nlohmann::json& material, const CachedAnswer& answer) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace mblast::llm
