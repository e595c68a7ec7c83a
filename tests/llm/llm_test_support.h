// Shared by the LLM client tests: the fake server (tests/support/fake_llm_server.py) as a
// child process, scratch folders, environment variables set for one test.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/llm/client.h"
#include "mblast/process.h"

namespace mblast::llm::testing {

// The key the tests present; it must never show up in an error, a log or a cache file.
inline constexpr const char* kTestKey = "sk-test-KEY-3f9a1c77e2d54b08-DO-NOT-LEAK";

// A fresh folder under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets (or, with nullopt, unsets) environment variables; restores them on destruction.
class EnvGuard {
 public:
  EnvGuard() = default;
  ~EnvGuard();
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  void set(const std::string& name, const std::optional<std::string>& value);

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// The python3 found when CMake ran, else python3 on PATH, else "".
std::string find_python();

class FakeLlmServer {
 public:
  // Starts the server with this script; throws when it does not come up within 10 s.
  explicit FakeLlmServer(const nlohmann::json& script, const std::string& expect_key = kTestKey);
  ~FakeLlmServer();
  int port() const { return port_; }
  // http://127.0.0.1:PORT/v1
  std::string base_url() const;
  // The requests logged so far, in arrival order.
  std::vector<nlohmann::json> requests() const;
  std::filesystem::path log_path() const { return dir_ / "requests.jsonl"; }

 private:
  ScratchDir dir_;
  Child child_;
  int port_ = 0;
};

// A configuration for the fake server: kind "openai" or "anthropic", key kTestKey.
LlmConfig config_for(const FakeLlmServer& server, const std::string& kind, const std::string& model = "fake-model");

// Fast retries, a short time-out, no cache unless asked.
ClientOptions fast_options();

Request simple_request(const std::string& user_text, const std::string& purpose = "actor");

// A port nothing listens on (bound, then released).
int unused_port();

// Every file under dir, concatenated (to look for leaked secrets).
std::string read_tree(const std::filesystem::path& dir);

}  // namespace mblast::llm::testing

// Starts a fake server named `var`, or skips the test when python3 is missing.
#define MBLAST_FAKE_LLM_SERVER(var, script)                                      \
  if (::mblast::llm::testing::find_python().empty())                             \
    GTEST_SKIP() << "python3 not found on PATH: the fake LLM server cannot run"; \
  ::mblast::llm::testing::FakeLlmServer var(script)
