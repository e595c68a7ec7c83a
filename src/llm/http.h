// One HTTP POST through libcurl, classified for the retry logic of the client. Internal.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mblast::llm {

struct HttpPost {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"; may hold a secret, never logged
  std::string body;
  double timeout_s = 120;  // the whole exchange
};

enum class HttpOutcome {
  answered,    // a complete HTTP answer (any status)
  timeout,     // the time-out passed first
  connection,  // refused, reset, closed without an answer, TLS handshake failed: worth a retry
  failed,      // not worth a retry (bad URL, certificate rejected, answer too large)
};

struct HttpResult {
  HttpOutcome outcome = HttpOutcome::failed;
  long status = 0;
  std::string body;
  std::optional<double> retry_after_s;  // Retry-After (seconds or HTTP date) or retry-after-ms
  std::string error;                    // what went wrong when not answered (one line)
};

// Thread-safe. Throws Error only when curl cannot be set up (a CURLcode from curl_global_init
// or curl_easy_setopt, with the expression, file and line).
HttpResult http_post(const HttpPost& request);

// Parses a Retry-After value: delta-seconds (decimals allowed) or an HTTP date.
std::optional<double> parse_retry_after(const std::string& value);

}  // namespace mblast::llm
