#include "mblast/llm/client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http.h"
#include "mblast/paths.h"
#include "message_text.h"
#include "wire.h"

namespace mblast::llm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Exponential backoff with "equal jitter": a uniform wait in [w/2, w], w doubling per retry.
double backoff_s(int retry, double initial, double max) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double w = std::min(max, initial * std::pow(2.0, retry - 1));
  if (!(w > 0)) return 0;
  return std::uniform_real_distribution<double>(w / 2, w)(rng);
}

bool retryable_status(long status) { return status == 408 || status == 409 || status == 429 || status >= 500; }

void validate(const Request& r) {
  if (r.messages.empty()) throw Error("LLM request: no messages");
  bool conversation = false;
  for (const Message& m : r.messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw Error("LLM request: unknown role '" + one_line(m.role, 40) + "' (system, user, assistant)");
    conversation = conversation || m.role != "system";
  }
  if (!conversation) throw Error("LLM request: only system messages");
  if (r.max_tokens <= 0) throw Error("LLM request: max_tokens must be positive");
  if (!(r.temperature >= 0 && r.temperature <= 2)) throw Error("LLM request: temperature must be in [0, 2]");
}

std::string attempts_text(int n) { return n == 1 ? "" : fmt::format(" after {} attempts", n); }

}  // namespace

Client::Client(LlmConfig config, ClientOptions options) : config_(std::move(config)), options_(std::move(options)) {
  if (config_.provider.kind != "openai" && config_.provider.kind != "anthropic")
    throw UserError("LLM: unknown provider kind '" + config_.provider.kind + "' (openai, anthropic)");
  timeout_s_ = options_.timeout_s.value_or(config_.timeout_s.value_or(120.0));
  max_retries_ = options_.max_retries.value_or(config_.max_retries.value_or(4));
  if (!(timeout_s_ > 0)) throw UserError("LLM: the time-out must be positive");
  if (max_retries_ < 0) throw UserError("LLM: max_retries must be >= 0");
  if (!(options_.backoff_initial_s >= 0) || !(options_.backoff_max_s >= 0))
    throw UserError("LLM: backoff times must be >= 0");
  budget_ = config_.budget;
  if (options_.budget.max_calls) budget_.max_calls = options_.budget.max_calls;
  if (options_.budget.max_tokens) budget_.max_tokens = options_.budget.max_tokens;
  if (options_.budget.max_usd) budget_.max_usd = options_.budget.max_usd;
  if (options_.cache_mode != CacheMode::off)
    cache_ =
        std::make_unique<ResponseCache>(options_.cache_dir.empty() ? mblast::cache_dir() / "llm" : options_.cache_dir);
}

Client::~Client() = default;

std::string Client::prefix() const { return "LLM: " + config_.provider.describe() + ": "; }

void Client::reserve_call(const std::string& purpose) {
  std::lock_guard lock(mu_);
  Usage t;
  for (const auto& [p, u] : spent_) {
    t.calls += u.calls;
    t.input_tokens += u.input_tokens;
    t.output_tokens += u.output_tokens;
    t.cost_usd += u.cost_usd;
  }
  const std::string who = purpose.empty() ? "" : " (refusing a call for " + purpose + ")";
  if (budget_.max_calls && t.calls + in_flight_ >= *budget_.max_calls)
    throw BudgetExceeded(prefix() +
                         fmt::format("budget spent: {} of {} calls{}", t.calls + in_flight_, *budget_.max_calls, who));
  if (budget_.max_tokens && t.input_tokens + t.output_tokens >= *budget_.max_tokens)
    throw BudgetExceeded(prefix() + fmt::format("budget spent: {} of {} tokens{}", t.input_tokens + t.output_tokens,
                                                *budget_.max_tokens, who));
  if (budget_.max_usd && t.cost_usd >= *budget_.max_usd)
    throw BudgetExceeded(prefix() +
                         fmt::format("budget spent: ${:.4f} of ${:.4f}{}", t.cost_usd, *budget_.max_usd, who));
  ++in_flight_;
}

void Client::record(const std::string& purpose, const Usage& u) {
  std::lock_guard lock(mu_);
  Usage& s = spent_[purpose];
  s.input_tokens += u.input_tokens;
  s.output_tokens += u.output_tokens;
  s.cost_usd += u.cost_usd;
  s.calls += u.calls;
  s.cache_hits += u.cache_hits;
  s.price_known = s.price_known && u.price_known;
}

Usage Client::total() const {
  std::lock_guard lock(mu_);
  Usage t;
  for (const auto& [p, u] : spent_) {
    t.input_tokens += u.input_tokens;
    t.output_tokens += u.output_tokens;
    t.cost_usd += u.cost_usd;
    t.calls += u.calls;
    t.cache_hits += u.cache_hits;
    t.price_known = t.price_known && u.price_known;
  }
  return t;
}

Usage Client::total_for(const std::string& purpose) const {
  std::lock_guard lock(mu_);
  auto it = spent_.find(purpose);
  return it == spent_.end() ? Usage{} : it->second;
}

double Client::seconds_waiting() const {
  std::lock_guard lock(mu_);
  return waited_s_;
}

Response Client::complete(const Request& request) {
  validate(request);
  const auto t0 = Clock::now();
  struct Waited {
    Client* c;
    Clock::time_point t0;
    ~Waited() {
      std::lock_guard lock(c->mu_);
      c->waited_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
    }
  } waited{this, t0};
  const ProviderSpec& provider = config_.provider;
  const nlohmann::json material = cache_material(provider, request);
  Response resp;
  resp.cache_key = cache_key(provider, request);

  if (cache_) {
    std::string why;
    std::optional<CachedAnswer> hit = cache_->load(resp.cache_key, material, &why);
    if (!hit && options_.cache_mode == CacheMode::replay) {
      const nlohmann::json masked = replay_material(material);
      std::string masked_why;
      hit = cache_->load(replay_key(masked), masked, &masked_why);
    }
    if (hit) {
      resp.text = std::move(hit->text);
      resp.model = std::move(hit->model);
      resp.finish_reason = std::move(hit->finish_reason);
      resp.from_cache = true;
      resp.attempts = 0;
      resp.latency_s = seconds_since(t0);
      Usage u;
      u.cache_hits = 1;
      record(request.purpose, u);
      return resp;
    }
    if (!why.empty()) spdlog::warn("LLM cache: {} (treated as not cached)", why);
    if (options_.cache_mode == CacheMode::replay)
      throw LlmError(LlmErrorKind::not_cached,
                     prefix() + "not in the cache: run without --replay (" +
                         (why.empty() ? "no entry " + resp.cache_key + " in " + cache_->dir().string() : why) + ")",
                     0);
  }

  reserve_call(request.purpose);
  struct InFlight {
    Client* c;
    ~InFlight() {
      std::lock_guard lock(c->mu_);
      --c->in_flight_;
    }
  } in_flight{this};

  const HttpPost post = build_post(provider, config_.api_key, request, timeout_s_);
  const int max_attempts = max_retries_ + 1;
  const std::string& key = config_.api_key;
  for (int attempt = 1;; ++attempt) {
    HttpResult r = http_post(post);
    // A server may echo the key (in an error); gone before anything is cut, parsed or shown.
    r.body = redact(std::move(r.body), key);
    r.error = redact(std::move(r.error), key);
    if (r.outcome == HttpOutcome::answered && r.status >= 200 && r.status < 300) {
      Reply reply;
      try {
        reply = parse_reply(provider, r.body);
      } catch (const MalformedReply& e) {
        throw LlmError(LlmErrorKind::malformed, redact(prefix() + "malformed answer: " + e.what(), key), attempt);
      }
      Usage u;
      u.calls = 1;
      u.input_tokens = reply.input_tokens;
      u.output_tokens = reply.output_tokens;
      if (auto price = config_.prices.find(provider.model)) {
        u.cost_usd = cost_usd(*price, u.input_tokens, u.output_tokens);
      } else {
        u.price_known = false;
        static std::mutex warned_mu;
        static std::set<std::string> warned;
        std::lock_guard lock(warned_mu);
        if (warned.insert(provider.model).second)
          spdlog::info("LLM: no price for model {}: its cost counts as 0 (add it to \"prices\" in {})", provider.model,
                       llm_config_file().string());
      }
      record(request.purpose, u);
      if (reply.refused)
        throw LlmError(
            LlmErrorKind::refused,
            redact(prefix() + "the model declined" +
                       (reply.refusal.empty() ? " (" + reply.finish_reason + ")" : ": " + one_line(reply.refusal)),
                   key),
            attempt);
      resp.text = std::move(reply.text);
      resp.model = std::move(reply.model);
      resp.finish_reason = std::move(reply.finish_reason);
      resp.usage = u;
      resp.attempts = attempt;
      if (cache_) {
        try {
          const CachedAnswer answer{resp.text, resp.model, resp.finish_reason, u.input_tokens, u.output_tokens};
          cache_->store(resp.cache_key, material, answer);
          const nlohmann::json masked = replay_material(material);
          cache_->store(replay_key(masked), masked, answer);
        } catch (const Error& e) {
          spdlog::warn("{} (the answer is used, not cached)", e.what());
        }
      }
      resp.latency_s = seconds_since(t0);
      return resp;
    }

    LlmErrorKind kind = LlmErrorKind::connection;
    bool retry = true;
    std::optional<double> hint;
    std::string what;  // for the log line of a retry
    std::string final_text;
    if (r.outcome == HttpOutcome::answered) {
      kind = LlmErrorKind::http;
      retry = retryable_status(r.status);
      hint = r.retry_after_s;
      const std::string reason = error_reason(r.body);
      what = fmt::format("HTTP {}", r.status);
      final_text = fmt::format("HTTP {}{}: {}", r.status, attempts_text(attempt), reason);
    } else if (r.outcome == HttpOutcome::timeout) {
      kind = LlmErrorKind::timeout;
      what = "time-out";
      final_text = fmt::format("no answer within {:g} s{}", timeout_s_, attempts_text(attempt));
    } else {
      retry = r.outcome == HttpOutcome::connection;
      what = one_line(r.error);
      final_text = fmt::format("connection failed{}: {}", attempts_text(attempt), one_line(r.error));
    }
    if (!retry || attempt >= max_attempts)
      throw LlmError(kind, redact(prefix() + final_text, key), attempt,
                     kind == LlmErrorKind::http ? static_cast<int>(r.status) : 0);
    const double wait = hint ? std::min(*hint, options_.backoff_max_s)
                             : backoff_s(attempt, options_.backoff_initial_s, options_.backoff_max_s);
    spdlog::warn("{}attempt {} of {} failed ({}); retrying in {:.2f} s", redact(prefix(), key), attempt, max_attempts,
                 redact(what, key), wait);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
}

}  // namespace mblast::llm
