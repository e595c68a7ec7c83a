#include "llm_test_support.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mblast::llm::testing {

namespace fs = std::filesystem;

ScratchDir::ScratchDir() {
  std::string tmpl = (fs::temp_directory_path() / "mblast-llm-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

EnvGuard::~EnvGuard() {
  for (const auto& [name, value] : saved_) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
}

void EnvGuard::set(const std::string& name, const std::optional<std::string>& value) {
  if (!saved_.count(name)) {
    const char* old = std::getenv(name.c_str());
    saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
  }
  if (value)
    ::setenv(name.c_str(), value->c_str(), 1);
  else
    ::unsetenv(name.c_str());
}

std::string find_python() {
  if (const std::string configured = MBLAST_LLM_TEST_PYTHON;
      !configured.empty() && ::access(configured.c_str(), X_OK) == 0)
    return configured;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / "python3";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

FakeLlmServer::FakeLlmServer(const nlohmann::json& script, const std::string& expect_key) {
  const fs::path script_path = dir_ / "script.json";
  std::ofstream(script_path) << script.dump(2);
  SpawnOptions o;
  o.argv = {find_python(),  MBLAST_FAKE_LLM_SERVER_PY, "--script",     script_path.string(),
            "--log",        log_path().string(),       "--expect-key", expect_key,
            "--watch-stdin"};
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  child_ = spawn(o);
  // The first line is "PORT <n>".
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("the fake LLM server did not print its port within 10 s");
    pollfd pfd{child_.stdout_fd(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(child_.stdout_fd(), buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("the fake LLM server exited before printing its port");
    line.append(buf, static_cast<size_t>(n));
  }
  if (line.rfind("PORT ", 0) != 0) throw std::runtime_error("unexpected first line from the fake LLM server: " + line);
  port_ = std::stoi(line.substr(5));
}

FakeLlmServer::~FakeLlmServer() {
  child_.close_stdin();
  child_.kill();
}

std::string FakeLlmServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

std::vector<nlohmann::json> FakeLlmServer::requests() const {
  std::vector<nlohmann::json> out;
  std::ifstream in(log_path());
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

LlmConfig config_for(const FakeLlmServer& server, const std::string& kind, const std::string& model) {
  LlmConfig c;
  c.spec = (kind == "anthropic" ? "anthropic+" : "") + server.base_url() + ":" + model;
  c.provider = parse_llm_spec(c.spec);
  c.source = "test";
  c.api_key = kTestKey;
  c.api_key_source = "test";
  return c;
}

ClientOptions fast_options() {
  ClientOptions o;
  o.timeout_s = 5;
  o.max_retries = 4;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.cache_mode = CacheMode::off;
  return o;
}

Request simple_request(const std::string& user_text, const std::string& purpose) {
  Request r;
  r.messages = {{"system", "You write fast kernels."}, {"user", user_text}};
  r.purpose = purpose;
  return r;
}

int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot find an unused port");
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string read_tree(const fs::path& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  return all;
}

}  // namespace mblast::llm::testing
