// Where the LLM configuration comes from: the --llm flag, else $MBLAST_LLM, else the config
// file ($MBLAST_CONFIG, else config_dir()/config.json, i.e. $MBLAST_CONFIG_DIR,
// $XDG_CONFIG_HOME/mblast or ~/.config/mblast):
//
//   {"llm": "anthropic:claude-sonnet-4-5", "api_key": "...", "timeout_s": 120, "max_retries": 4,
//    "prices": {"my-model": {"input": 0.5, "output": 1.5}},
//    "budget": {"max_calls": 200, "max_tokens": 2000000, "max_usd": 5.0}}
//
// Other top-level keys belong to other parts of mblast and are ignored here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "mblast/llm/prices.h"
#include "mblast/llm/provider.h"

namespace mblast::llm {

// Limits on what one Client may spend; an unset field has no limit.
struct Budget {
  std::optional<int64_t> max_calls;   // answered requests (cache hits do not count)
  std::optional<int64_t> max_tokens;  // input + output tokens
  std::optional<double> max_usd;      // at the price table's prices
  bool any() const { return max_calls || max_tokens || max_usd; }
};

struct LlmConfig {
  ProviderSpec provider;
  std::string spec;    // the text it was parsed from
  std::string source;  // "--llm", "MBLAST_LLM" or the config file's path
  // May be empty (a local server without authentication). Never printed or logged.
  std::string api_key;
  std::string api_key_source;       // "MBLAST_LLM_API_KEY", "OPENAI_API_KEY", the config file, or ""
  std::optional<double> timeout_s;  // seconds per attempt, from the config file
  std::optional<int> max_retries;   // from the config file
  Budget budget;                    // from the config file
  PriceTable prices;                // built-in prices with the config file's overrides
};

// Builds the configuration, or returns nullopt when no LLM is configured anywhere (or the
// chosen value is "none" or "builtin"): the caller then uses the builtin policy.
// API key, most specific first: $MBLAST_LLM_API_KEY, then $OPENAI_API_KEY / $ANTHROPIC_API_KEY
// (only for openai:/anthropic:, never sent to a custom URL), then the config file's "api_key".
// Throws UserError with a one-line reason: bad spec, unreadable or malformed config file, or
// no key for openai:/anthropic: (naming the variable to set) unless require_key is false (replay
// from the cache needs no key).
std::optional<LlmConfig> resolve_llm_config(const std::string& flag_value, bool require_key = true);

// The config file resolve_llm_config reads (it need not exist).
std::filesystem::path llm_config_file();

}  // namespace mblast::llm
