// The client against the fake server: wire formats, retries, time-outs, errors.
#include <gtest/gtest.h>

#include <chrono>

#include "llm_test_support.h"
#include "mblast/llm/client.h"
#include "message_text.h"
#include "wire.h"

namespace mblast::llm {
namespace {

using namespace testing;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

json one(const json& entry) { return {{"mode", "sequence"}, {"responses", json::array({entry})}}; }
json seq(const std::vector<json>& entries) {
  json list = json::array();
  for (const json& e : entries) list.push_back(e);
  return {{"mode", "sequence"}, {"responses", list}};
}

// Runs the request and returns the LlmError it must throw.
LlmError expect_llm_error(Client& client, const Request& r) {
  try {
    client.complete(r);
  } catch (const LlmError& e) {
    return e;
  }
  ADD_FAILURE() << "complete() did not throw LlmError";
  return LlmError(LlmErrorKind::http, "none", 0);
}

TEST(LlmClient, OpenAiRequestAndAnswerFollowTheChatCompletionsFormat) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "use float4 loads"}, {"usage", {{"input", 120}, {"output", 30}}}}));
  Client client(config_for(server, "openai"), fast_options());
  Request r;
  r.messages = {{"system", "You are the actor."}, {"user", "make vec_add fast"}};
  r.max_tokens = 777;
  r.temperature = 0.3;
  r.purpose = "actor";
  const Response resp = client.complete(r);
  EXPECT_EQ(resp.text, "use float4 loads");
  EXPECT_EQ(resp.model, "fake-model");
  EXPECT_EQ(resp.finish_reason, "stop");
  EXPECT_EQ(resp.usage.input_tokens, 120);
  EXPECT_EQ(resp.usage.output_tokens, 30);
  EXPECT_EQ(resp.usage.calls, 1);
  EXPECT_EQ(resp.attempts, 1);
  EXPECT_FALSE(resp.from_cache);
  EXPECT_GT(resp.latency_s, 0);
  EXPECT_EQ(resp.cache_key.size(), 32u);

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const json& q = reqs[0];
  EXPECT_EQ(q["method"], "POST");
  EXPECT_EQ(q["path"], "/v1/chat/completions");
  EXPECT_EQ(q["auth_header"], "authorization");
  EXPECT_EQ(q["auth_matches_expected_key"], true);
  EXPECT_EQ(q["headers"]["authorization"],
            "<redacted:" + std::to_string(std::string("Bearer ").size() + std::string(kTestKey).size()) + ">");
  EXPECT_EQ(q["headers"]["content-type"], "application/json");
  EXPECT_FALSE(q["headers"].contains("x-api-key"));
  EXPECT_FALSE(q["headers"].contains("anthropic-version"));
  const json& b = q["body"];
  EXPECT_EQ(b["model"], "fake-model");
  EXPECT_EQ(b["messages"], json::parse(R"([{"role":"system","content":"You are the actor."},
                                           {"role":"user","content":"make vec_add fast"}])"));
  EXPECT_EQ(b["max_tokens"], 777);
  EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.3);
  EXPECT_FALSE(b.contains("max_completion_tokens"));  // a compatible server takes max_tokens
  EXPECT_EQ(b.size(), 4u) << b.dump();
}

TEST(LlmClient, AnthropicRequestAndAnswerFollowTheMessagesFormat) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "tile it"}, {"usage", {{"input", 200}, {"output", 40}}}}));
  Client client(config_for(server, "anthropic", "claude-test"), fast_options());
  Request r;
  r.messages = {
      {"system", "Rule one."}, {"user", "first"}, {"assistant", "ok"}, {"system", "Rule two."}, {"user", "second"}};
  r.max_tokens = 1234;
  r.temperature = 0.5;
  const Response resp = client.complete(r);
  EXPECT_EQ(resp.text, "tile it");
  EXPECT_EQ(resp.finish_reason, "end_turn");
  EXPECT_EQ(resp.model, "claude-test");
  EXPECT_EQ(resp.usage.input_tokens, 200);
  EXPECT_EQ(resp.usage.output_tokens, 40);

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const json& q = reqs[0];
  EXPECT_EQ(q["path"], "/v1/messages");
  EXPECT_EQ(q["auth_header"], "x-api-key");
  EXPECT_EQ(q["auth_matches_expected_key"], true);
  EXPECT_EQ(q["headers"]["x-api-key"], "<redacted:" + std::to_string(std::string(kTestKey).size()) + ">");
  EXPECT_EQ(q["headers"]["anthropic-version"], "2023-06-01");
  EXPECT_EQ(q["headers"]["content-type"], "application/json");
  EXPECT_FALSE(q["headers"].contains("authorization"));
  const json& b = q["body"];
  EXPECT_EQ(b["model"], "claude-test");
  EXPECT_EQ(b["system"], "Rule one.\n\nRule two.");
  EXPECT_EQ(b["messages"], json::parse(R"([{"role":"user","content":"first"},{"role":"assistant","content":"ok"},
                                           {"role":"user","content":"second"}])"));
  EXPECT_EQ(b["max_tokens"], 1234);
  EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.5);
  EXPECT_EQ(b.size(), 5u) << b.dump();
}

TEST(LlmClient, AnthropicTextBlocksAreJoinedAndOtherBlocksIgnored) {
  const json answer = {{"id", "msg_1"},
                       {"type", "message"},
                       {"role", "assistant"},
                       {"model", "claude-test"},
                       {"content", json::parse(R"([{"type":"thinking","thinking":"hmm","signature":"x"},
                                                   {"type":"text","text":"part one, "},
                                                   {"type":"text","text":"part two"}])")},
                       {"stop_reason", "max_tokens"},
                       {"usage", {{"input_tokens", 10}, {"cache_read_input_tokens", 5}, {"output_tokens", 7}}}};
  MBLAST_FAKE_LLM_SERVER(server, one({{"raw_body", answer.dump()}}));
  Client client(config_for(server, "anthropic", "claude-test"), fast_options());
  const Response resp = client.complete(simple_request("go"));
  EXPECT_EQ(resp.text, "part one, part two");
  EXPECT_EQ(resp.finish_reason, "max_tokens");
  EXPECT_EQ(resp.usage.input_tokens, 15);
  EXPECT_EQ(resp.usage.output_tokens, 7);
}

TEST(LlmClient, OfficialOpenAiGetsMaxCompletionTokensAndReasoningModelsNoTemperature) {
  Request r = simple_request("x");
  r.max_tokens = 99;
  r.temperature = 0.7;
  const HttpPost gpt = build_post(parse_llm_spec("openai:gpt-4.1"), "k1", r, 10);
  EXPECT_EQ(gpt.url, "https://api.openai.com/v1/chat/completions");
  EXPECT_EQ(gpt.headers.at(0), "Authorization: Bearer k1");
  const json b = json::parse(gpt.body);
  EXPECT_EQ(b["max_completion_tokens"], 99);
  EXPECT_FALSE(b.contains("max_tokens"));
  EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.7);

  for (const char* reasoning : {"o3", "o4-mini", "gpt-5", "gpt-5-mini"}) {
    const json rb = json::parse(build_post(parse_llm_spec(std::string("openai:") + reasoning), "k", r, 10).body);
    EXPECT_FALSE(rb.contains("temperature")) << reasoning;
    EXPECT_EQ(rb["max_completion_tokens"], 99) << reasoning;
  }
  const HttpPost claude = build_post(parse_llm_spec("anthropic:claude-sonnet-4-5"), "k2", r, 10);
  EXPECT_EQ(claude.url, "https://api.anthropic.com/v1/messages");
  EXPECT_EQ(claude.headers.at(0), "x-api-key: k2");
}

TEST(LlmClient, NoKeyMeansNoAuthHeader) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "ok"}}));
  LlmConfig c = config_for(server, "openai");
  c.api_key.clear();
  Client client(c, fast_options());
  EXPECT_EQ(client.complete(simple_request("hi")).text, "ok");
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_TRUE(reqs[0]["auth_header"].is_null());
  EXPECT_FALSE(reqs[0]["headers"].contains("authorization"));
}

TEST(LlmClient, SlowAnswerTimesOutOnEveryAttempt) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "late"}, {"delay_s", 1.5}, {"times", 10}}));
  ClientOptions o = fast_options();
  o.timeout_s = 0.25;
  o.max_retries = 2;
  Client client(config_for(server, "openai"), o);
  const auto t0 = Clock::now();
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  const double elapsed = since(t0);
  EXPECT_EQ(e.kind(), LlmErrorKind::timeout);
  EXPECT_EQ(e.attempts(), 3);
  EXPECT_NE(std::string(e.what()).find("no answer within 0.25 s after 3 attempts"), std::string::npos) << e.what();
  EXPECT_GE(elapsed, 0.75);
  EXPECT_LT(elapsed, 1.5);  // gave up on each attempt at the time-out, not when the server answered
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(client.total().calls, 0);
}

TEST(LlmClient, RetryAfterIsHonoured) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"status", 429}, {"retry_after", 1}}, {{"text", "after the wait"}}}));
  ClientOptions o = fast_options();
  o.backoff_max_s = 5;
  Client client(config_for(server, "openai"), o);
  const auto t0 = Clock::now();
  const Response resp = client.complete(simple_request("hi"));
  EXPECT_GE(since(t0), 1.0);
  EXPECT_EQ(resp.text, "after the wait");
  EXPECT_EQ(resp.attempts, 2);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_GE(reqs[1]["time"].get<double>() - reqs[0]["time"].get<double>(), 1.0);
}

TEST(LlmClient, RetryAfterIsCappedAtTheBackoffMaximum) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"status", 503}, {"retry_after", "600"}}, {{"text", "ok"}}}));
  ClientOptions o = fast_options();
  o.backoff_max_s = 0.2;
  Client client(config_for(server, "anthropic"), o);
  const auto t0 = Clock::now();
  EXPECT_EQ(client.complete(simple_request("hi")).text, "ok");
  EXPECT_GE(since(t0), 0.2);
  EXPECT_LT(since(t0), 5.0);
}

TEST(LlmMessages, OneLineCollapsesWhiteSpaceAndCutsWholeCharacters) {
  EXPECT_EQ(one_line("  a\n\tb   c\r\n"), "a b c");
  EXPECT_EQ(one_line("abcdef", 6), "abcdef");
  EXPECT_EQ(one_line("abcdefg", 6), "abcdef...");
  EXPECT_EQ(one_line("abcd\xc3\xa9z", 5), "abcd...");  // never half of "é"
  EXPECT_EQ(one_line("abc\xc3\xa9z", 5), "abc\xc3\xa9...");
  EXPECT_EQ(redact("key=K1 again K1", "K1"), "key=<redacted> again <redacted>");
  EXPECT_EQ(redact("nothing", ""), "nothing");
}

TEST(LlmClient, RetryAfterParsesSecondsAndDates) {
  EXPECT_DOUBLE_EQ(parse_retry_after("3").value(), 3.0);
  EXPECT_DOUBLE_EQ(parse_retry_after(" 1.5").value(), 1.5);
  EXPECT_FALSE(parse_retry_after("soon"));
  EXPECT_FALSE(parse_retry_after(""));
  EXPECT_DOUBLE_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT").value(), 0.0);  // in the past
  const auto future = parse_retry_after("Fri, 31 Dec 2100 23:59:59 GMT");
  ASSERT_TRUE(future);
  EXPECT_GT(*future, 1e9);
}

TEST(LlmClient, ServerErrorThenSuccess) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"status", 500}}, {{"text", "second time lucky"}}}));
  Client client(config_for(server, "openai"), fast_options());
  const Response resp = client.complete(simple_request("hi"));
  EXPECT_EQ(resp.text, "second time lucky");
  EXPECT_EQ(resp.attempts, 2);
  EXPECT_EQ(client.total().calls, 1);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmClient, DroppedConnectionThenSuccess) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"drop", true}}, {{"drop", true}}, {{"text", "ok"}}}));
  Client client(config_for(server, "anthropic"), fast_options());
  const Response resp = client.complete(simple_request("hi"));
  EXPECT_EQ(resp.text, "ok");
  EXPECT_EQ(resp.attempts, 3);
}

TEST(LlmClient, ConnectionRefusedIsRetriedThenReported) {
  LlmConfig c;
  c.provider = parse_llm_spec("http://127.0.0.1:" + std::to_string(unused_port()) + "/v1:m");
  ClientOptions o = fast_options();
  o.max_retries = 2;
  Client client(c, o);
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  EXPECT_EQ(e.kind(), LlmErrorKind::connection);
  EXPECT_EQ(e.attempts(), 3);
  EXPECT_NE(std::string(e.what()).find("connection failed after 3 attempts"), std::string::npos) << e.what();
}

TEST(LlmClient, TruncatedJsonIsMalformedAndNotRetried) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "a long answer that will be cut"}, {"truncate", true}, {"times", 5}}));
  Client client(config_for(server, "openai"), fast_options());
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  EXPECT_EQ(e.kind(), LlmErrorKind::malformed);
  EXPECT_EQ(e.attempts(), 1);
  EXPECT_NE(std::string(e.what()).find("malformed answer: not JSON"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(LlmClient, GarbageAndMissingFieldsAreMalformed) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"raw_body", "<html>\n<body>Bad gateway</body>\n</html>"}},
                                      {{"raw_body", R"({"id": "x", "object": "chat.completion"})"}},
                                      {{"raw_body", R"({"choices": []})"}},
                                      {{"raw_body", R"({"choices": [{"message": {"content": 42}}]})"}},
                                      {{"raw_body", ""}}}));
  Client client(config_for(server, "openai"), fast_options());
  for (const char* want :
       {"not JSON (", "no \"choices\" array", "\"choices\" is empty", "content is not a string", "an empty body"}) {
    const LlmError e = expect_llm_error(client, simple_request(want));
    EXPECT_EQ(e.kind(), LlmErrorKind::malformed);
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(LlmClient, PersistentServerErrorReportsStatusAttemptsAndReason) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"status", 500}, {"times", 10}}));
  ClientOptions o = fast_options();
  o.max_retries = 3;
  Client client(config_for(server, "openai"), o);
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  EXPECT_EQ(e.kind(), LlmErrorKind::http);
  EXPECT_EQ(e.http_status(), 500);
  EXPECT_EQ(e.attempts(), 4);
  EXPECT_EQ(std::string(e.what()),
            "LLM: openai " + server.base_url() + " fake-model: HTTP 500 after 4 attempts: fake error 500");
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(LlmClient, ClientErrorsAreNotRetriedAndShowTheProvidersMessage) {
  MBLAST_FAKE_LLM_SERVER(
      server,
      one({{"status", 400},
           {"error_body",
            {{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "max_tokens: too large"}}}}},
           {"times", 5}}));
  Client client(config_for(server, "anthropic", "claude-x"), fast_options());
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  EXPECT_EQ(e.kind(), LlmErrorKind::http);
  EXPECT_EQ(e.attempts(), 1);
  EXPECT_EQ(std::string(e.what()),
            "LLM: anthropic " + server.base_url() + " claude-x: HTTP 400: max_tokens: too large");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(LlmClient, RetryableClientStatuses) {
  MBLAST_FAKE_LLM_SERVER(server, seq({{{"status", 408}}, {{"status", 409}}, {{"status", 529}}, {{"text", "ok"}}}));
  Client client(config_for(server, "anthropic"), fast_options());
  const Response resp = client.complete(simple_request("hi"));
  EXPECT_EQ(resp.attempts, 4);
}

TEST(LlmClient, LongNonJsonErrorBodyIsCutToOneLine) {
  std::string body = "line one\nline two\n";
  body += std::string(500, 'x');
  MBLAST_FAKE_LLM_SERVER(server, one({{"status", 404}, {"error_body", body}}));
  Client client(config_for(server, "openai"), fast_options());
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  const std::string what = e.what();
  EXPECT_EQ(what.find('\n'), std::string::npos);
  EXPECT_NE(what.find("HTTP 404: line one line two xxx"), std::string::npos) << what;
  EXPECT_LT(what.size(), 320u);
  EXPECT_EQ(what.substr(what.size() - 3), "...");
}

TEST(LlmClient, RefusalsAreErrorsButStillCount) {
  const json openai_refusal = json::parse(R"({"model":"m","choices":[{"index":0,"finish_reason":"stop",
      "message":{"role":"assistant","content":null,"refusal":"I cannot help with that."}}],
      "usage":{"prompt_tokens":11,"completion_tokens":3}})");
  MBLAST_FAKE_LLM_SERVER(server, one({{"raw_body", openai_refusal.dump()}}));
  Client client(config_for(server, "openai"), fast_options());
  const LlmError e = expect_llm_error(client, simple_request("hi"));
  EXPECT_EQ(e.kind(), LlmErrorKind::refused);
  EXPECT_NE(std::string(e.what()).find("the model declined: I cannot help with that."), std::string::npos) << e.what();
  EXPECT_EQ(client.total().calls, 1);
  EXPECT_EQ(client.total().input_tokens, 11);
}

TEST(LlmClient, AnthropicRefusalStopReason) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", ""}, {"finish_reason", "refusal"}}));
  Client client(config_for(server, "anthropic"), fast_options());
  EXPECT_EQ(expect_llm_error(client, simple_request("hi")).kind(), LlmErrorKind::refused);
}

TEST(LlmClient, MissingUsageCountsZeroTokens) {
  MBLAST_FAKE_LLM_SERVER(server, one({{"text", "ok"}, {"usage", nullptr}}));
  Client client(config_for(server, "openai"), fast_options());
  const Response resp = client.complete(simple_request("hi"));
  EXPECT_EQ(resp.usage.input_tokens, 0);
  EXPECT_EQ(resp.usage.output_tokens, 0);
  EXPECT_EQ(resp.usage.calls, 1);
}

TEST(LlmClient, RequestsThatAreNotWellFormedAreRejectedBeforeTheNetwork) {
  LlmConfig c;
  c.provider = parse_llm_spec("http://127.0.0.1:9/v1:m");
  Client client(c, fast_options());
  Request empty;
  EXPECT_THROW(client.complete(empty), Error);
  Request bad_role = simple_request("x");
  bad_role.messages.push_back({"tool", "y"});
  EXPECT_THROW(client.complete(bad_role), Error);
  Request only_system;
  only_system.messages = {{"system", "s"}};
  EXPECT_THROW(client.complete(only_system), Error);
  Request zero = simple_request("x");
  zero.max_tokens = 0;
  EXPECT_THROW(client.complete(zero), Error);
  try {
    client.complete(empty);
  } catch (const LlmError&) {
    ADD_FAILURE() << "a malformed request is a programming error, not an LlmError";
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace mblast::llm
