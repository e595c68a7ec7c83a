// The two wire formats: OpenAI chat completions and Anthropic messages. Internal.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "http.h"
#include "mblast/llm/provider.h"

namespace mblast::llm {

struct Request;

// POST {base}/chat/completions or {base}/messages with the provider's headers and body.
HttpPost build_post(const ProviderSpec& provider, const std::string& api_key, const Request& request, double timeout_s);

struct Reply {
  std::string text, model, finish_reason;
  int64_t input_tokens = 0, output_tokens = 0;
  bool refused = false;  // no text, and the provider says it declined
  std::string refusal;   // its explanation, when it gave one
};

// A 2xx body that is not the provider's answer.
class MalformedReply : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws MalformedReply with a one-line reason.
Reply parse_reply(const ProviderSpec& provider, const std::string& body);

// What an error answer says: error.message (OpenAI, Anthropic), message or detail (vLLM,
// FastAPI servers), else the body itself; one line, at most 200 characters.
std::string error_reason(const std::string& body);

}  // namespace mblast::llm
