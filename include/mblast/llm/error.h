// Errors of the LLM client. Every message is one line that starts with "LLM: <provider>"
// and never contains an API key.
#pragma once

#include <string>

#include "mblast/error.h"

namespace mblast::llm {

enum class LlmErrorKind {
  timeout,     // no complete answer within the time-out, on every attempt
  http,        // the server answered with a non-2xx status (see http_status())
  connection,  // could not connect, or the connection was reset or closed without an answer
  malformed,   // a 2xx answer that is not the provider's JSON (garbage, truncated, fields missing)
  budget,      // refused before the call: a budget of calls, tokens or money is spent
  refused,     // the model declined (content filter, refusal) and gave no text
  not_cached,  // replay mode and the request is not in the response cache
};

const char* to_string(LlmErrorKind kind);

class LlmError : public Error {
 public:
  // attempts: how many HTTP requests were made (0 when none was); http_status: the last
  // status for kind http, else 0.
  LlmError(LlmErrorKind kind, const std::string& message, int attempts = 1, int http_status = 0);
  LlmErrorKind kind() const noexcept { return kind_; }
  int attempts() const noexcept { return attempts_; }
  int http_status() const noexcept { return http_status_; }

 private:
  LlmErrorKind kind_;
  int attempts_;
  int http_status_;
};

// Thrown by Client::complete before a call once a budget of the client is spent.
class BudgetExceeded : public LlmError {
 public:
  explicit BudgetExceeded(const std::string& message) : LlmError(LlmErrorKind::budget, message, 0) {}
};

}  // namespace mblast::llm
