// LLM specs and where the configuration comes from (flag > environment > config file).
#include <gtest/gtest.h>

#include <fstream>

#include "llm_test_support.h"
#include "mblast/llm/config.h"

namespace mblast::llm {
namespace {

using namespace testing;
namespace fs = std::filesystem;

TEST(LlmSpec, Providers) {
  ProviderSpec p = parse_llm_spec("openai:gpt-4o");
  EXPECT_EQ(p.kind, "openai");
  EXPECT_EQ(p.base_url, "https://api.openai.com/v1");
  EXPECT_EQ(p.model, "gpt-4o");
  EXPECT_TRUE(p.is_official());
  EXPECT_EQ(p.describe(), "openai gpt-4o");

  p = parse_llm_spec("  anthropic:claude-sonnet-4-5-20250929 \n");
  EXPECT_EQ(p.kind, "anthropic");
  EXPECT_EQ(p.base_url, "https://api.anthropic.com/v1");
  EXPECT_EQ(p.model, "claude-sonnet-4-5-20250929");
  EXPECT_EQ(p.describe(), "anthropic claude-sonnet-4-5-20250929");

  EXPECT_EQ(parse_llm_spec("OpenAI:gpt-4.1").kind, "openai");
}

TEST(LlmSpec, CompatibleServersAtAUrl) {
  ProviderSpec p = parse_llm_spec("http://localhost:8000/v1:Qwen/Qwen2.5-Coder-32B-Instruct");
  EXPECT_EQ(p.kind, "openai");
  EXPECT_EQ(p.base_url, "http://localhost:8000/v1");
  EXPECT_EQ(p.model, "Qwen/Qwen2.5-Coder-32B-Instruct");
  EXPECT_FALSE(p.is_official());
  EXPECT_EQ(p.describe(), "openai http://localhost:8000/v1 Qwen/Qwen2.5-Coder-32B-Instruct");

  p = parse_llm_spec("http://127.0.0.1:11434/v1:qwen2.5-coder:7b");  // Ollama tags keep their colon
  EXPECT_EQ(p.base_url, "http://127.0.0.1:11434/v1");
  EXPECT_EQ(p.model, "qwen2.5-coder:7b");

  p = parse_llm_spec("https://gpu-box.example.org/llm/v1/:llama-3.3-70b");
  EXPECT_EQ(p.base_url, "https://gpu-box.example.org/llm/v1");
  EXPECT_EQ(p.model, "llama-3.3-70b");

  p = parse_llm_spec("anthropic+http://127.0.0.1:9999/v1:claude-test");
  EXPECT_EQ(p.kind, "anthropic");
  EXPECT_EQ(p.base_url, "http://127.0.0.1:9999/v1");
  EXPECT_EQ(p.model, "claude-test");
  EXPECT_FALSE(p.is_official());

  p = parse_llm_spec("openai+https://api.openai.com/v1:gpt-4o");
  EXPECT_TRUE(p.is_official());

  p = parse_llm_spec("https://api.anthropic.com/v1:claude-x");  // openai kind at Anthropic's host: not official
  EXPECT_FALSE(p.is_official());

  p = parse_llm_spec("http://user:secret@host:8000/v1:m");
  EXPECT_EQ(p.describe(), "openai http://***@host:8000/v1 m");
}

TEST(LlmSpec, MalformedSpecsAreUserErrorsOfOneLine) {
  for (const char* bad : {"", "   ", "gpt-4o", "openai:", "anthropic:", "gemini:pro", "http://localhost:8000:model",
                          "http://localhost:8000/v1", "http://localhost:8000/v1:", "ftp://host/v1:m",
                          "anthropic+ftp://host/v1:m", "anthropic+openai:gpt-4o", "openai:gpt 4o", "http:///v1:m"}) {
    try {
      parse_llm_spec(bad);
      ADD_FAILURE() << "accepted: '" << bad << "'";
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_FALSE(what.empty());
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  try {
    parse_llm_spec("gemini:pro");
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown provider 'gemini'"), std::string::npos) << e.what();
  }
}

// A clean environment: HOME and XDG_CONFIG_HOME in a scratch folder, no LLM variables.
class LlmConfigResolution : public ::testing::Test {
 protected:
  void SetUp() override {
    env.set("HOME", (home.path()).string());
    env.set("XDG_CONFIG_HOME", (home / "xdg").string());
    for (const char* v : {"MBLAST_CONFIG", "MBLAST_CONFIG_DIR", "MBLAST_LLM", "MBLAST_LLM_API_KEY", "OPENAI_API_KEY",
                          "ANTHROPIC_API_KEY"})
      env.set(v, std::nullopt);
  }
  fs::path write_config(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path;
  }
  fs::path xdg_config() const { return home / "xdg" / "mblast" / "config.json"; }

  ScratchDir home;
  EnvGuard env;
};

TEST_F(LlmConfigResolution, NothingConfiguredMeansTheBuiltinPolicy) {
  EXPECT_FALSE(resolve_llm_config(""));
  env.set("OPENAI_API_KEY", "sk-x");  // a key alone chooses nothing
  EXPECT_FALSE(resolve_llm_config(""));
}

TEST_F(LlmConfigResolution, FlagBeatsEnvironmentBeatsFile) {
  write_config(xdg_config(), R"({"llm": "http://127.0.0.1:1/v1:from-file", "other_tool_setting": true})");
  auto c = resolve_llm_config("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provider.model, "from-file");
  EXPECT_EQ(c->source, xdg_config().string());

  env.set("MBLAST_LLM", "http://127.0.0.1:2/v1:from-env");
  c = resolve_llm_config("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provider.model, "from-env");
  EXPECT_EQ(c->source, "MBLAST_LLM");

  c = resolve_llm_config("anthropic+http://127.0.0.1:3/v1:from-flag");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provider.model, "from-flag");
  EXPECT_EQ(c->provider.kind, "anthropic");
  EXPECT_EQ(c->source, "--llm");
  EXPECT_EQ(c->spec, "anthropic+http://127.0.0.1:3/v1:from-flag");

  EXPECT_FALSE(resolve_llm_config("none"));  // the builtin policy, whatever else is configured
  env.set("MBLAST_LLM", "builtin");
  EXPECT_FALSE(resolve_llm_config(""));
}

TEST_F(LlmConfigResolution, ConfigFileLocations) {
  env.set("XDG_CONFIG_HOME", std::nullopt);
  write_config(home / ".config" / "mblast" / "config.json", R"({"llm": "http://h:1/v1:in-home"})");
  EXPECT_EQ(llm_config_file(), home / ".config" / "mblast" / "config.json");
  EXPECT_EQ(resolve_llm_config("")->provider.model, "in-home");

  env.set("XDG_CONFIG_HOME", (home / "xdg").string());
  write_config(xdg_config(), R"({"llm": "http://h:1/v1:in-xdg"})");
  EXPECT_EQ(resolve_llm_config("")->provider.model, "in-xdg");

  const fs::path explicit_file = write_config(home / "elsewhere.json", R"({"llm": "http://h:1/v1:explicit"})");
  env.set("MBLAST_CONFIG", explicit_file.string());
  EXPECT_EQ(resolve_llm_config("")->provider.model, "explicit");

  env.set("MBLAST_CONFIG", (home / "missing.json").string());
  EXPECT_THROW(resolve_llm_config(""), UserError);
}

TEST_F(LlmConfigResolution, KeysMostSpecificFirst) {
  env.set("OPENAI_API_KEY", "sk-openai");
  auto c = resolve_llm_config("openai:gpt-4o");
  EXPECT_EQ(c->api_key, "sk-openai");
  EXPECT_EQ(c->api_key_source, "OPENAI_API_KEY");

  env.set("MBLAST_LLM_API_KEY", "  sk-mblast\n");  // trimmed
  c = resolve_llm_config("openai:gpt-4o");
  EXPECT_EQ(c->api_key, "sk-mblast");
  EXPECT_EQ(c->api_key_source, "MBLAST_LLM_API_KEY");
  env.set("MBLAST_LLM_API_KEY", std::nullopt);

  env.set("ANTHROPIC_API_KEY", "sk-ant");
  EXPECT_EQ(resolve_llm_config("anthropic:claude-haiku-4-5")->api_key, "sk-ant");

  // The providers' own variables never go to a custom URL; a local server may need no key.
  c = resolve_llm_config("http://127.0.0.1:8000/v1:local");
  EXPECT_EQ(c->api_key, "");
  c = resolve_llm_config("anthropic+http://127.0.0.1:8000/v1:local");
  EXPECT_EQ(c->api_key, "");
  env.set("MBLAST_LLM_API_KEY", "sk-local");
  EXPECT_EQ(resolve_llm_config("http://127.0.0.1:8000/v1:local")->api_key, "sk-local");
}

TEST_F(LlmConfigResolution, MissingKeyNamesTheVariableToSet) {
  for (const auto& [spec, var] :
       {std::pair{"openai:gpt-4o", "OPENAI_API_KEY"}, std::pair{"anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"}}) {
    try {
      resolve_llm_config(spec);
      ADD_FAILURE() << "no error for " << spec;
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("set ") + var), std::string::npos) << what;
      EXPECT_NE(what.find("MBLAST_LLM_API_KEY"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
  }
  const auto replay = resolve_llm_config("openai:gpt-4o", /*require_key=*/false);  // replay needs none
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->api_key, "");
  env.set("OPENAI_API_KEY", "sk-bad\nInjected: header");
  EXPECT_THROW(resolve_llm_config("openai:gpt-4o"), UserError);
}

TEST_F(LlmConfigResolution, FileKeyOnlyForTheServerItWasConfiguredFor) {
  write_config(xdg_config(), R"({"llm": "anthropic:claude-haiku-4-5", "api_key": "sk-file"})");
  auto c = resolve_llm_config("");
  EXPECT_EQ(c->api_key, "sk-file");
  EXPECT_EQ(c->api_key_source, xdg_config().string());
  EXPECT_EQ(resolve_llm_config("anthropic:claude-opus-4-5")->api_key, "sk-file");  // same server
  EXPECT_THROW(resolve_llm_config("openai:gpt-4o"), UserError);                    // not sent to OpenAI
  EXPECT_EQ(resolve_llm_config("http://127.0.0.1:1/v1:m")->api_key, "");           // nor to a local server
  env.set("ANTHROPIC_API_KEY", "sk-env");
  EXPECT_EQ(resolve_llm_config("")->api_key, "sk-env");  // the environment beats the file

  write_config(xdg_config(), R"({"api_key": "sk-any"})");  // a key without "llm" applies to any provider
  EXPECT_EQ(resolve_llm_config("http://127.0.0.1:1/v1:m")->api_key, "sk-any");
}

TEST_F(LlmConfigResolution, FileSettings) {
  write_config(xdg_config(), R"({"llm": "http://127.0.0.1:1/v1:my-model", "timeout_s": 42.5, "max_retries": 2,
      "budget": {"max_calls": 10, "max_tokens": 50000, "max_usd": 1.25},
      "prices": {"my-model": {"input": 0.5, "output": 1.5}, "gpt-4o": {"input": 1, "output": 2}}})");
  const auto c = resolve_llm_config("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->timeout_s, 42.5);
  EXPECT_EQ(c->max_retries, 2);
  EXPECT_EQ(c->budget.max_calls, 10);
  EXPECT_EQ(c->budget.max_tokens, 50000);
  EXPECT_EQ(c->budget.max_usd, 1.25);
  EXPECT_DOUBLE_EQ(c->prices.find("my-model")->output_per_mtok, 1.5);
  EXPECT_DOUBLE_EQ(c->prices.find("gpt-4o")->input_per_mtok, 1);              // overridden
  EXPECT_DOUBLE_EQ(c->prices.find("claude-haiku-4-5")->input_per_mtok, 1.0);  // defaults kept
}

TEST_F(LlmConfigResolution, BadFilesAreUserErrorsThatNameTheFileAndHideTheKey) {
  const std::string path = xdg_config().string();
  const auto expect_error = [&](const std::string& text, const std::string& fragment) {
    write_config(xdg_config(), text);
    try {
      resolve_llm_config("");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
      EXPECT_EQ(what.find("sk-SECRET"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  expect_error(R"({"llm": "openai:gpt-4o", "api_key": "sk-SECRET" oops})", "not valid JSON");
  expect_error(R"(["llm"])", "expected a JSON object");
  expect_error(R"({"llm": 5})", "\"llm\" must be");
  expect_error(R"({"llm": "nonsense"})", "bad LLM spec");
  expect_error(R"({"llm": "http://h:1/v1:m", "timeout_s": -1})", "timeout_s");
  expect_error(R"({"llm": "http://h:1/v1:m", "budget": {"max_dollars": 5}})", "budget.max_dollars");
  expect_error(R"({"llm": "http://h:1/v1:m", "budget": {"max_calls": 2.5}})", "budget.max_calls");
  expect_error(R"({"llm": "http://h:1/v1:m", "prices": {"m": {"input": 1}}})", "prices.m");
  expect_error(R"({"llm": "http://h:1/v1:m", "api_key": 12})", "api_key");
}

}  // namespace
}  // namespace mblast::llm
