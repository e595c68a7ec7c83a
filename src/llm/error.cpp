#include "mblast/llm/error.h"

namespace mblast::llm {

const char* to_string(LlmErrorKind kind) {
  switch (kind) {
    case LlmErrorKind::timeout:
      return "timeout";
    case LlmErrorKind::http:
      return "http";
    case LlmErrorKind::connection:
      return "connection";
    case LlmErrorKind::malformed:
      return "malformed";
    case LlmErrorKind::budget:
      return "budget";
    case LlmErrorKind::refused:
      return "refused";
    case LlmErrorKind::not_cached:
      return "not_cached";
  }
  return "unknown";
}

LlmError::LlmError(LlmErrorKind kind, const std::string& message, int attempts, int http_status)
    : Error(message), kind_(kind), attempts_(attempts), http_status_(http_status) {}

}  // namespace mblast::llm
