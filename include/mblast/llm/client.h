// The LLM client: one request, one answer, over the OpenAI chat-completions or the Anthropic
// messages API, with retries, time-outs, budgets, cost accounting and a response cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mblast/llm/cache.h"
#include "mblast/llm/config.h"
#include "mblast/llm/error.h"

namespace mblast::llm {

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct Request {
  std::vector<Message> messages;
  int max_tokens = 4096;
  double temperature = 0.2;
  std::string purpose;  // "actor", "critic", ...: accounting only, not part of the cache key
  // Tells repeated samples of one prompt apart in the cache (the k candidates of one actor
  // step); part of the cache key when non-zero.
  int sample = 0;
};

struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  int calls = 0;            // answered requests that went to the provider
  int cache_hits = 0;       // requests answered from the cache (they cost nothing)
  bool price_known = true;  // false when some call's model is not in the price table (cost 0)
};

struct Response {
  std::string text;
  std::string model;          // as the server reported it
  std::string finish_reason;  // as the provider says it: "stop", "length", "end_turn", "max_tokens", ...
  Usage usage;                // this call's spend; all zero for a cache hit
  bool from_cache = false;
  double latency_s = 0;   // wall time of complete(), retries and waits included
  int attempts = 1;       // HTTP requests made; 0 for a cache hit
  std::string cache_key;  // content hash of the request (see cache.h)
};

struct ClientOptions {
  std::optional<double> timeout_s;  // per attempt; else the config's, else 120
  std::optional<int> max_retries;   // retries after the first attempt; else the config's, else 4
  double backoff_initial_s = 1.0;   // first wait; doubles per retry, with jitter in [w/2, w]
  double backoff_max_s = 30.0;      // also the cap of a server's Retry-After
  Budget budget;                    // each field set here overrides the config's
  CacheMode cache_mode = CacheMode::normal;
  std::filesystem::path cache_dir;  // empty: mblast::cache_dir() / "llm"
};

// Thread-safe: complete() may be called from several threads; budgets then count calls in
// flight, so the call limit holds exactly and the token and money limits may be passed by the
// calls already in flight when they were reached.
class Client {
 public:
  Client(LlmConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends the request (or answers it from the cache). Retries on 408, 409, 429, 5xx,
  // connection failures and time-outs, honouring Retry-After; a 2xx answer that cannot be
  // parsed is not retried. Throws BudgetExceeded before the call when a budget is spent,
  // LlmError for every other failure, mblast::Error for a request that is not well formed.
  Response complete(const Request& request);

  Usage total() const;
  // Wall seconds spent inside complete() so far (requests, retries, back-off waits, cache
  // reads), whatever the outcome: the LLM's share of a step's time.
  double seconds_waiting() const;
  Usage total_for(const std::string& purpose) const;
  const LlmConfig& config() const { return config_; }
  // What applies after merging options and config.
  double timeout_s() const { return timeout_s_; }
  int max_retries() const { return max_retries_; }
  const Budget& budget() const { return budget_; }

 private:
  void reserve_call(const std::string& purpose);
  void record(const std::string& purpose, const Usage& usage);
  std::string prefix() const;  // "LLM: openai gpt-4o: "

  LlmConfig config_;
  ClientOptions options_;
  double timeout_s_;
  int max_retries_;
  Budget budget_;
  std::unique_ptr<ResponseCache> cache_;

  mutable std::mutex mu_;
  std::map<std::string, Usage> spent_;  // by purpose
  double waited_s_ = 0;                 // in complete(), whatever its outcome
  int in_flight_ = 0;
};

}  // namespace mblast::llm
