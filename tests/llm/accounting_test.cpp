// Budgets, prices, the response cache, and keeping the API key secret.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "llm_test_support.h"
#include "mblast/llm/client.h"

namespace mblast::llm {
namespace {

using namespace testing;
using nlohmann::json;

json answering(const std::string& text, int input = 100, int output = 50) {
  return {{"mode", "match"},
          {"responses", json::array({{{"text", text}, {"usage", {{"input", input}, {"output", output}}}}})}};
}

TEST(LlmBudget, CallsLimitRefusesTheNextCallWithoutSendingIt) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok"));
  ClientOptions o = fast_options();
  o.budget.max_calls = 2;
  Client client(config_for(server, "openai"), o);
  client.complete(simple_request("one"));
  client.complete(simple_request("two"));
  try {
    client.complete(simple_request("three", "critic"));
    FAIL() << "the third call was not refused";
  } catch (const BudgetExceeded& e) {
    EXPECT_EQ(e.kind(), LlmErrorKind::budget);
    EXPECT_EQ(e.attempts(), 0);
    EXPECT_NE(std::string(e.what()).find("budget spent: 2 of 2 calls (refusing a call for critic)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(client.total().calls, 2);
}

TEST(LlmBudget, TokenLimitRefusesOnceSpent) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok", 100, 50));
  ClientOptions o = fast_options();
  o.budget.max_tokens = 200;
  Client client(config_for(server, "anthropic"), o);
  client.complete(simple_request("one"));  // 150 spent: below the limit, so the next goes out
  client.complete(simple_request("two"));  // 300 spent
  try {
    client.complete(simple_request("three"));
    FAIL() << "not refused";
  } catch (const BudgetExceeded& e) {
    EXPECT_NE(std::string(e.what()).find("budget spent: 300 of 200 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmBudget, MoneyLimitUsesThePriceTable) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok", 100000, 50000));
  LlmConfig c = config_for(server, "openai", "priced-model");
  c.prices.set("priced-model", Price{10.0, 20.0});  // $1 input + $1 output per call
  ClientOptions o = fast_options();
  o.budget.max_usd = 3.0;
  Client client(c, o);
  EXPECT_DOUBLE_EQ(client.complete(simple_request("one")).usage.cost_usd, 2.0);
  EXPECT_DOUBLE_EQ(client.complete(simple_request("two")).usage.cost_usd, 2.0);
  EXPECT_THROW(client.complete(simple_request("three")), BudgetExceeded);
  EXPECT_DOUBLE_EQ(client.total().cost_usd, 4.0);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmBudget, OptionsOverrideTheConfigFieldByField) {
  LlmConfig c;
  c.provider = parse_llm_spec("http://127.0.0.1:9/v1:m");
  c.budget.max_calls = 10;
  c.budget.max_usd = 1.0;
  c.timeout_s = 33;
  c.max_retries = 7;
  ClientOptions o;
  o.cache_mode = CacheMode::off;
  o.budget.max_calls = 3;
  o.max_retries = 1;
  Client client(c, o);
  EXPECT_EQ(client.budget().max_calls, 3);
  EXPECT_EQ(client.budget().max_usd, 1.0);
  EXPECT_FALSE(client.budget().max_tokens);
  EXPECT_DOUBLE_EQ(client.timeout_s(), 33);
  EXPECT_EQ(client.max_retries(), 1);
  LlmConfig bare;
  bare.provider = c.provider;
  Client defaults(bare, o);
  EXPECT_DOUBLE_EQ(defaults.timeout_s(), 120);
}

TEST(LlmBudget, ConcurrentCallsNeverExceedTheCallLimit) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok"));
  ClientOptions o = fast_options();
  o.budget.max_calls = 5;
  Client client(config_for(server, "openai"), o);
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        try {
          client.complete(simple_request("thread " + std::to_string(t) + " call " + std::to_string(i)));
          ++ok;
        } catch (const BudgetExceeded&) {
          ++refused;
        } catch (...) {
          ++other;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(refused, 7);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(server.requests().size(), 5u);
  EXPECT_EQ(client.total().calls, 5);
}

TEST(LlmPrices, AccountingPerPurposeAndUnknownModels) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok", 1000, 500));
  LlmConfig known = config_for(server, "openai", "gpt-4o");  // a built-in price: $2.50 / $10 per Mtok
  Client client(known, fast_options());
  const Response a = client.complete(simple_request("a", "actor"));
  EXPECT_TRUE(a.usage.price_known);
  EXPECT_NEAR(a.usage.cost_usd, 1000 * 2.5e-6 + 500 * 10e-6, 1e-12);
  client.complete(simple_request("b", "actor"));
  client.complete(simple_request("c", "critic"));
  EXPECT_EQ(client.total_for("actor").calls, 2);
  EXPECT_EQ(client.total_for("actor").input_tokens, 2000);
  EXPECT_EQ(client.total_for("critic").calls, 1);
  EXPECT_EQ(client.total_for("critic").output_tokens, 500);
  EXPECT_EQ(client.total_for("planner").calls, 0);
  EXPECT_EQ(client.total().calls, 3);
  EXPECT_NEAR(client.total().cost_usd, 3 * a.usage.cost_usd, 1e-12);
  EXPECT_TRUE(client.total().price_known);

  Client unknown(config_for(server, "openai", "my-local-llama"), fast_options());
  const Response u = unknown.complete(simple_request("d"));
  EXPECT_FALSE(u.usage.price_known);
  EXPECT_EQ(u.usage.cost_usd, 0);
  EXPECT_EQ(u.usage.input_tokens, 1000);
  EXPECT_FALSE(unknown.total().price_known);
}

TEST(LlmPrices, TableLookup) {
  const PriceTable t;
  EXPECT_DOUBLE_EQ(t.find("gpt-4o")->input_per_mtok, 2.50);
  EXPECT_DOUBLE_EQ(t.find("gpt-4o")->output_per_mtok, 10.00);
  EXPECT_DOUBLE_EQ(t.find("gpt-4o-mini")->input_per_mtok, 0.15);
  EXPECT_DOUBLE_EQ(t.find("gpt-4o-2024-08-06")->input_per_mtok, 2.50);             // snapshot of a family
  EXPECT_DOUBLE_EQ(t.find("claude-sonnet-4-5-20250929")->output_per_mtok, 15.00);  // dated snapshot
  EXPECT_DOUBLE_EQ(t.find("claude-opus-4-20250514")->input_per_mtok, 15.00);
  EXPECT_DOUBLE_EQ(t.find("claude-3-7-sonnet-latest")->input_per_mtok, 3.00);
  EXPECT_FALSE(t.find("o3-pro"));  // not priced as o3: a different, dearer model
  EXPECT_FALSE(t.find("gpt-5-pro"));
  EXPECT_FALSE(t.find("llama3.1:8b"));
  EXPECT_FALSE(t.find(""));
  PriceTable custom;
  custom.set("gpt-4o", Price{1, 2});
  custom.set("gpt-4o-2024-05-13", Price{5, 15});
  EXPECT_DOUBLE_EQ(custom.find("gpt-4o")->input_per_mtok, 1);
  EXPECT_DOUBLE_EQ(custom.find("gpt-4o-2024-05-13")->input_per_mtok, 5);  // the exact name wins
  EXPECT_DOUBLE_EQ(custom.find("gpt-4o-2024-11-20")->input_per_mtok, 1);
  EXPECT_TRUE(PriceTable::empty().entries().empty());
  EXPECT_DOUBLE_EQ(cost_usd(Price{3, 15}, 2'000'000, 100'000), 6.0 + 1.5);
}

TEST(LlmCache, SameRequestIsAnsweredFromTheCacheAndCostsNothing) {
  MBLAST_FAKE_LLM_SERVER(server, answering("cached answer", 100, 50));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::normal;
  o.cache_dir = cache.path();
  Client client(config_for(server, "openai", "gpt-4o"), o);
  const Response first = client.complete(simple_request("same prompt", "actor"));
  EXPECT_FALSE(first.from_cache);
  const Response second = client.complete(simple_request("same prompt", "critic"));  // purpose is not in the key
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.text, "cached answer");
  EXPECT_EQ(second.model, first.model);
  EXPECT_EQ(second.finish_reason, "stop");
  EXPECT_EQ(second.attempts, 0);
  EXPECT_EQ(second.usage.cost_usd, 0);
  EXPECT_EQ(second.usage.input_tokens, 0);
  EXPECT_EQ(second.cache_key, first.cache_key);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(client.total().calls, 1);
  EXPECT_EQ(client.total().cache_hits, 1);
  EXPECT_EQ(client.total_for("critic").cache_hits, 1);
  EXPECT_EQ(client.total_for("critic").cost_usd, 0);

  // What the answer depends on changes the key; a new client reads the same files.
  Request hotter = simple_request("same prompt");
  hotter.temperature = 0.9;
  Request longer = simple_request("same prompt");
  longer.max_tokens = 100;
  Request sample = simple_request("same prompt");
  sample.sample = 1;
  Client again(config_for(server, "openai", "gpt-4o"), o);
  EXPECT_FALSE(again.complete(hotter).from_cache);
  EXPECT_FALSE(again.complete(longer).from_cache);
  EXPECT_FALSE(again.complete(sample).from_cache);
  EXPECT_TRUE(again.complete(simple_request("same prompt")).from_cache);
  EXPECT_EQ(server.requests().size(), 4u);
  Client other_model(config_for(server, "openai", "gpt-4.1"), o);
  EXPECT_FALSE(other_model.complete(simple_request("same prompt")).from_cache);
  Client other_kind(config_for(server, "anthropic", "gpt-4o"), o);
  EXPECT_FALSE(other_kind.complete(simple_request("same prompt")).from_cache);
}

TEST(LlmCache, EntryIsOneJsonFileWithTheRequestAndNoTemporaries) {
  MBLAST_FAKE_LLM_SERVER(server, answering("entry text", 7, 3));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::normal;
  o.cache_dir = cache.path();
  Client client(config_for(server, "anthropic", "claude-test"), o);
  const Response r = client.complete(simple_request("store me"));
  const ResponseCache rc(cache.path());
  const auto path = rc.path_for(r.cache_key);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::ifstream in(path);
  const json doc = json::parse(in);
  EXPECT_EQ(doc["key"], r.cache_key);
  EXPECT_EQ(doc["request"]["model"], "claude-test");
  EXPECT_EQ(doc["request"]["kind"], "anthropic");
  EXPECT_EQ(doc["request"]["messages"][1]["content"], "store me");
  EXPECT_EQ(doc["response"]["text"], "entry text");
  EXPECT_EQ(doc["response"]["input_tokens"], 7);
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache.path()))
    if (e.is_regular_file()) {
      ++files;
      EXPECT_EQ(e.path().extension(), ".json") << e.path();
    }
  EXPECT_EQ(files, 2);  // the exact entry and the replay entry (measured figures masked)
}

TEST(LlmCache, AReplayMatchesAPromptWhoseMeasuredFiguresDiffer) {
  MBLAST_FAKE_LLM_SERVER(server, answering("the answer"));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::normal;
  o.cache_dir = cache.path();
  Client first(config_for(server, "openai", "gpt-4o"), o);
  const Request recorded = simple_request("step 2: 1.23 ms at 0.41 of peak, 3 tries, 12 us, 2x, at 175% of peak");
  EXPECT_FALSE(first.complete(recorded).from_cache);
  // Another run on a timed target: the same prompt but for what was measured.
  const Request timed_again = simple_request("step 2: 1.31 ms at 0.39 of peak, 3 tries, 13 us, 3x, at 97% of peak");
  ClientOptions replay = o;
  replay.cache_mode = CacheMode::replay;
  Client replaying(config_for(server, "openai", "gpt-4o"), replay);
  const Response r = replaying.complete(timed_again);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(r.text, "the answer");
  // The words a threshold draws from the figures are measurement too: the critic's verdict, the
  // gap to the peak and the bottleneck class, as src/loop/critic.cpp and state.cpp write them.
  Client first_words(config_for(server, "openai", "gpt-4o"), o);
  EXPECT_FALSE(first_words
                   .complete(simple_request("tiles: 11.25x faster (2.24 ms -> 199 us); bottleneck latency -> memory; "
                                            "remaining gap: 21% of peak, still memory-bound"))
                   .from_cache);
  EXPECT_TRUE(replaying
                  .complete(simple_request("tiles: 1.02x slower (2.24 ms -> 2.3 ms); bottleneck latency -> compute; "
                                           "at 81% of peak: little left to gain"))
                  .from_cache);
  EXPECT_TRUE(replaying
                  .complete(simple_request("tiles: no clear change (1.01x, within noise) (2.24 ms -> 2.2 ms); "
                                           "bottleneck memory -> latency; remaining gap: both fractions low (3% of "
                                           "peak) - launch overhead, too little parallelism or serial dependences"))
                  .from_cache);
  EXPECT_THROW(replaying.complete(simple_request("unroll: 11.25x faster (2.24 ms -> 199 us); bottleneck latency -> "
                                                 "memory; remaining gap: 21% of peak, still memory-bound")),
               LlmError);  // what was done is not a measurement
  // What is not a measurement still counts: another step, another number of tries.
  EXPECT_THROW(replaying.complete(simple_request("step 3: 1.23 ms at 0.41 of peak, 3 tries, 12 us, 2x")), LlmError);
  EXPECT_THROW(replaying.complete(simple_request("step 2: 1.23 ms at 0.41 of peak, 4 tries, 12 us, 2x")), LlmError);
  // A normal run never takes the masked entry: a different prompt is a new request.
  Client normal(config_for(server, "openai", "gpt-4o"), o);
  EXPECT_FALSE(normal.complete(timed_again).from_cache);
  EXPECT_EQ(server.requests().size(), 3u);  // recorded, first_words, normal
}

TEST(LlmCache, CorruptOrForeignEntriesAreMisses) {
  MBLAST_FAKE_LLM_SERVER(server, answering("fresh"));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::normal;
  o.cache_dir = cache.path();
  const LlmConfig c = config_for(server, "openai");
  const Request r = simple_request("p");
  const std::string key = cache_key(c.provider, r);
  const ResponseCache rc(cache.path());
  std::filesystem::create_directories(rc.path_for(key).parent_path());
  std::ofstream(rc.path_for(key)) << "{\"format\": 1, \"request\": ";  // cut short
  Client client(c, o);
  EXPECT_FALSE(client.complete(r).from_cache);  // and it is rewritten whole
  EXPECT_TRUE(client.complete(r).from_cache);
  // An entry stored for other material under this key (a collision) is not used.
  Request other = simple_request("q");
  rc.store(cache_key(c.provider, other), cache_material(c.provider, r), CachedAnswer{"wrong", "m", "stop", 1, 1});
  ClientOptions replay = o;
  replay.cache_mode = CacheMode::replay;
  Client replayer(c, replay);
  try {
    replayer.complete(other);
    FAIL() << "a foreign entry was used";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmErrorKind::not_cached);
    EXPECT_NE(std::string(e.what()).find("stored for a different request"), std::string::npos) << e.what();
  }
}

TEST(LlmCache, ReplayAnswersFromTheCacheAndAMissIsAnError) {
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_dir = cache.path();
  std::string base;
  {
    MBLAST_FAKE_LLM_SERVER(server, answering("recorded"));
    base = server.base_url();
    o.cache_mode = CacheMode::normal;
    Client recorder(config_for(server, "openai"), o);
    recorder.complete(simple_request("recorded prompt"));
  }
  // The server is gone: replay needs no network.
  LlmConfig c;
  c.provider = parse_llm_spec(base + ":fake-model");
  c.api_key = kTestKey;
  o.cache_mode = CacheMode::replay;
  Client replayer(c, o);
  const Response hit = replayer.complete(simple_request("recorded prompt"));
  EXPECT_TRUE(hit.from_cache);
  EXPECT_EQ(hit.text, "recorded");
  try {
    replayer.complete(simple_request("never asked"));
    FAIL() << "a replay miss did not throw";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmErrorKind::not_cached);
    EXPECT_EQ(e.attempts(), 0);
    EXPECT_NE(std::string(e.what()).find("not in the cache: run without --replay"), std::string::npos) << e.what();
  }
  EXPECT_EQ(replayer.total().calls, 0);
  EXPECT_EQ(replayer.total().cache_hits, 1);
}

TEST(LlmCache, OffWritesNothing) {
  MBLAST_FAKE_LLM_SERVER(server, answering("ok"));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::off;
  o.cache_dir = cache.path();
  Client client(config_for(server, "openai"), o);
  client.complete(simple_request("x"));
  EXPECT_FALSE(client.complete(simple_request("x")).from_cache);
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_TRUE(std::filesystem::is_empty(cache.path()));
}

TEST(LlmCache, KeyIsStableAndCoversWhatItPromises) {
  const ProviderSpec p = parse_llm_spec("openai:gpt-4o");
  Request r = simple_request("k");
  const std::string k = cache_key(p, r);
  EXPECT_EQ(k.size(), 32u);
  EXPECT_EQ(k, cache_key(p, r));
  r.purpose = "something else";
  EXPECT_EQ(k, cache_key(p, r));
  r.messages[0].role = "user";
  EXPECT_NE(k, cache_key(p, r));
  const json m = cache_material(p, simple_request("k"));
  EXPECT_EQ(m.size(), 6u) << m.dump();  // kind, base_url, model, max_tokens, temperature, messages
  EXPECT_FALSE(m.contains("sample"));
}

TEST(LlmSecrets, TheKeyNeverAppearsInErrorsLogsOrCacheFiles) {
  const std::string key = kTestKey;
  // A server that echoes the key back in its error (as some do) and then answers.
  MBLAST_FAKE_LLM_SERVER(
      server,
      json({{"mode", "sequence"},
            {"responses",
             json::array({
                 {{"status", 401}, {"error_body", {{"error", {{"message", "Incorrect API key provided: " + key}}}}}},
                 {{"status", 500}, {"error_body", "upstream said " + key}, {"times", 2}},
                 {{"raw_body", "{\"oops\": \"" + key}},
                 {{"status", 400}, {"error_body", std::string(190, 'p') + key}},
                 {{"text", "fine"}},
             })}}));
  ScratchDir cache;
  ClientOptions o = fast_options();
  o.cache_mode = CacheMode::normal;
  o.cache_dir = cache.path();
  o.max_retries = 1;
  Client client(config_for(server, "openai"), o);
  std::vector<std::string> messages;
  for (int i = 0; i < 4; ++i) {
    try {
      client.complete(simple_request("attempt " + std::to_string(i)));
      ADD_FAILURE() << "call " << i << " should fail";
    } catch (const LlmError& e) {
      messages.push_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_NE(messages[0].find("HTTP 401: Incorrect API key provided: <redacted>"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("HTTP 500 after 2 attempts: upstream said <redacted>"), std::string::npos) << messages[1];
  EXPECT_NE(messages[2].find("malformed answer"), std::string::npos) << messages[2];
  for (const std::string& m : messages) EXPECT_EQ(m.find("sk-test"), std::string::npos) << m;  // not even a prefix
  EXPECT_EQ(client.complete(simple_request("cache me")).text, "fine");
  const std::string files = read_tree(cache.path());
  EXPECT_NE(files.find("cache me"), std::string::npos);
  EXPECT_EQ(files.find(key), std::string::npos);
  EXPECT_EQ(files.find("sk-test"), std::string::npos);
  // The key travelled only in its header: never in a request body.
  for (const json& q : server.requests()) {
    EXPECT_EQ(q["body"].dump().find(key), std::string::npos);
    EXPECT_EQ(q["auth_matches_expected_key"], true);
  }
}

}  // namespace
}  // namespace mblast::llm
