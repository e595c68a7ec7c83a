#include "http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>

#include "mblast/error.h"
#include "mblast/version.h"

// Every CURLcode of a setup call is checked here, at the call site.
#define MBLAST_CURL_CHECK(expr)                                                                                  \
  do {                                                                                                           \
    const CURLcode mblast_curl_rc_ = (expr);                                                                     \
    if (mblast_curl_rc_ != CURLE_OK)                                                                             \
      throw ::mblast::Error(::mblast::describe_call(std::string("curl: ") + curl_easy_strerror(mblast_curl_rc_), \
                                                    #expr, __FILE__, __LINE__));                                 \
  } while (0)

namespace mblast::llm {

namespace {

constexpr size_t kMaxAnswerBytes = 64u << 20;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { MBLAST_CURL_CHECK(curl_global_init(CURL_GLOBAL_DEFAULT)); });
}

struct EasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Exchange {
  std::string body;
  bool too_large = false;
  std::optional<double> retry_after_s;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  if (ex->body.size() + size * n > kMaxAnswerBytes) {
    ex->too_large = true;
    return 0;  // aborts the transfer
  }
  ex->body.append(data, size * n);
  return size * n;
}

bool starts_with_nocase(const std::string& s, const char* prefix) {
  for (size_t i = 0; prefix[i]; ++i)
    if (i >= s.size() || std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) ex->retry_after_s.reset();  // a new answer (after 100 Continue)
  const auto value = [&](size_t name_len) {
    std::string v = line.substr(name_len);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    return v;
  };
  if (starts_with_nocase(line, "retry-after-ms:")) {
    if (auto ms = parse_retry_after(value(15))) ex->retry_after_s = *ms / 1000.0;
  } else if (starts_with_nocase(line, "retry-after:") && !ex->retry_after_s) {
    ex->retry_after_s = parse_retry_after(value(12));
  }
  return size * n;
}

HttpOutcome classify(CURLcode rc) {
  switch (rc) {
    case CURLE_OK:
      return HttpOutcome::answered;
    case CURLE_OPERATION_TIMEDOUT:
      return HttpOutcome::timeout;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return HttpOutcome::connection;
    default:
      return HttpOutcome::failed;
  }
}

// Loopback always goes direct; the user's no_proxy list is kept.
std::string no_proxy_list() {
  std::string list = "localhost,127.0.0.1,::1";
  for (const char* var : {"no_proxy", "NO_PROXY"})
    if (const char* v = std::getenv(var); v && *v) return std::string(v) + "," + list;
  return list;
}

}  // namespace

std::optional<double> parse_retry_after(const std::string& raw) {
  size_t b = 0;
  while (b < raw.size() && std::isspace(static_cast<unsigned char>(raw[b]))) ++b;
  const std::string v = raw.substr(b);
  if (v.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(v[0]))) {
    char* end = nullptr;
    const double s = std::strtod(v.c_str(), &end);
    if (end && *end == '\0' && s >= 0) return s;
    return std::nullopt;
  }
  const time_t when = curl_getdate(v.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

HttpResult http_post(const HttpPost& req) {
  global_init();
  std::unique_ptr<CURL, EasyDeleter> curl(curl_easy_init());
  if (!curl) throw Error("curl: curl_easy_init failed (out of memory?)");
  std::unique_ptr<curl_slist, ListDeleter> headers;
  for (const std::string& h : req.headers) {
    curl_slist* l = curl_slist_append(headers.get(), h.c_str());
    if (!l) throw Error("curl: curl_slist_append failed (out of memory?)");
    headers.release();
    headers.reset(l);
  }
  // Send the body at once instead of waiting for "100 Continue".
  if (curl_slist* l = curl_slist_append(headers.get(), "Expect:"); l) {
    headers.release();
    headers.reset(l);
  }

  Exchange ex;
  char errbuf[CURL_ERROR_SIZE] = "";
  const long timeout_ms = std::max(1L, static_cast<long>(req.timeout_s * 1000));
  const std::string user_agent = std::string("mblast/") + kMblastVersion;
  const std::string no_proxy = no_proxy_list();
  CURL* c = curl.get();
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_URL, req.url.c_str()));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_POST, 1L));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data()));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size())));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get()));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 10000L)));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent.c_str()));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_NOPROXY, no_proxy.c_str()));
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https"));
#else
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS)));
#endif
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_WRITEDATA, &ex));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header));
  MBLAST_CURL_CHECK(curl_easy_setopt(c, CURLOPT_HEADERDATA, &ex));

  // The result of the transfer is data, classified for the caller, not a setup failure.
  const CURLcode rc = curl_easy_perform(c);
  HttpResult r;
  r.outcome = classify(rc);
  if (r.outcome == HttpOutcome::answered) {
    MBLAST_CURL_CHECK(curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status));
    r.body = std::move(ex.body);
    r.retry_after_s = ex.retry_after_s;
  } else if (ex.too_large) {
    r.outcome = HttpOutcome::failed;
    r.error = "the answer is larger than 64 MiB";
  } else {
    r.error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  }
  return r;
}

}  // namespace mblast::llm
