#include "mblast/llm/provider.h"

#include <cctype>

#include "mblast/error.h"

namespace mblast::llm {

namespace {

constexpr const char* kOpenAiUrl = "https://api.openai.com/v1";
constexpr const char* kAnthropicUrl = "https://api.anthropic.com/v1";
constexpr const char* kForms =
    "use openai:MODEL, anthropic:MODEL, http(s)://HOST:PORT/v1:MODEL or anthropic+http(s)://HOST:PORT/v1:MODEL";

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw UserError("bad LLM spec '" + spec + "': " + why);
}

void check_model(const std::string& spec, const std::string& model) {
  if (model.empty()) bad(spec, "no model after ':' (" + std::string(kForms) + ")");
  for (char c : model)
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
      bad(spec, "the model name contains white space");
}

// "scheme://authority/path:model" -> base URL and model.
ProviderSpec parse_url(const std::string& spec, const std::string& kind, const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") bad(spec, "the URL must start with http:// or https://");
  const size_t authority = scheme_end + 3;
  const size_t path = url.find('/', authority);
  if (path == std::string::npos || path == authority)
    bad(spec, "expected " + scheme + "://HOST[:PORT]/PATH:MODEL, e.g. " + scheme + "://localhost:8000/v1:MODEL");
  const size_t colon = url.find(':', path);
  if (colon == std::string::npos)
    bad(spec, "no ':MODEL' after the URL path (e.g. " + scheme + "://localhost:8000/v1:MODEL)");
  ProviderSpec p;
  p.kind = kind;
  p.base_url = url.substr(0, colon);
  while (p.base_url.size() > path + 1 && p.base_url.back() == '/') p.base_url.pop_back();
  p.model = url.substr(colon + 1);
  for (char c : p.base_url)
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
      bad(spec, "the URL contains white space");
  check_model(spec, p.model);
  return p;
}

// The authority part of a URL, without user:password@.
std::string host_of(const std::string& url, bool* had_userinfo = nullptr) {
  const size_t a = url.find("://");
  if (a == std::string::npos) return "";
  const size_t start = a + 3;
  const size_t end = url.find('/', start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  const size_t at = authority.rfind('@');
  if (had_userinfo) *had_userinfo = at != std::string::npos;
  return at == std::string::npos ? authority : authority.substr(at + 1);
}

}  // namespace

ProviderSpec parse_llm_spec(const std::string& raw) {
  const std::string spec = trim(raw);
  if (spec.empty()) throw UserError("empty LLM spec: " + std::string(kForms));
  if (spec.rfind("http://", 0) == 0 || spec.rfind("https://", 0) == 0) return parse_url(spec, "openai", spec);
  if (spec.rfind("openai+", 0) == 0) return parse_url(spec, "openai", spec.substr(7));
  if (spec.rfind("anthropic+", 0) == 0) return parse_url(spec, "anthropic", spec.substr(10));
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) bad(spec, "no provider (" + std::string(kForms) + ")");
  std::string kind = spec.substr(0, colon);
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  ProviderSpec p;
  p.model = spec.substr(colon + 1);
  if (kind == "openai") {
    p.kind = "openai";
    p.base_url = kOpenAiUrl;
  } else if (kind == "anthropic") {
    p.kind = "anthropic";
    p.base_url = kAnthropicUrl;
  } else {
    bad(spec, "unknown provider '" + kind + "' (" + kForms + ")");
  }
  check_model(spec, p.model);
  return p;
}

bool ProviderSpec::is_official() const {
  const std::string host = host_of(base_url);
  return base_url.rfind("https://", 0) == 0 &&
         ((kind == "openai" && host == "api.openai.com") || (kind == "anthropic" && host == "api.anthropic.com"));
}

std::string ProviderSpec::describe() const {
  if (is_official()) return kind + " " + model;
  bool userinfo = false;
  const std::string host = host_of(base_url, &userinfo);
  std::string shown = base_url;
  if (userinfo) {
    const size_t start = base_url.find("://") + 3;
    const size_t end = base_url.find('/', start);
    shown = base_url.substr(0, start) + "***@" + host + (end == std::string::npos ? "" : base_url.substr(end));
  }
  return kind + " " + shown + " " + model;
}

}  // namespace mblast::llm
