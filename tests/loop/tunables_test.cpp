// User-declared tunables: parsing, variants, and the one-line reasons for bad annotations.
#include <gtest/gtest.h>

#include "mblast/error.h"
#include "mblast/loop/tunables.h"

namespace mblast::loop {
namespace {

const char* kSource =
    "#include <mblast/abi.h>\n"
    "#define TILE 16  // mblast:tune 8 16 32\n"
    "#define WG 64 /* mblast:tune 64 128 action=opencl.work-group-size-from-kernel-info */\n"
    "#define OTHER 3\n"
    "int f() { return TILE * WG * OTHER; }\n";

TEST(Tunables, ParsesAnnotatedDefines) {
  auto knobs = parse_tunables(kSource);
  ASSERT_EQ(knobs.size(), 2u);
  EXPECT_EQ(knobs[0].name, "TILE");
  EXPECT_EQ(knobs[0].current, "16");
  EXPECT_EQ(knobs[0].values, (std::vector<std::string>{"8", "16", "32"}));
  EXPECT_EQ(knobs[1].name, "WG");
  EXPECT_EQ(knobs[1].action, "opencl.work-group-size-from-kernel-info");
  EXPECT_EQ(knobs[1].values, (std::vector<std::string>{"64", "128"}));
}

TEST(Tunables, EveryCombinationButTheCurrentOne) {
  auto vs = tunable_variants(kSource, "opencl", ".opencl.cpp");
  ASSERT_EQ(vs.size(), 5u);  // 3 x 2 combinations minus (16, 64)
  std::set<std::string> sources;
  for (const auto& v : vs) {
    sources.insert(v.source);
    EXPECT_EQ(v.family, "tunables");
    EXPECT_FALSE(v.actions.empty());
    EXPECT_NE(v.source.find("#define OTHER 3\n"), std::string::npos);
    std::string tile = v.params["TILE"], wg = v.params["WG"];
    EXPECT_NE(v.source.find("#define TILE " + tile + "  // mblast:tune"), std::string::npos) << v.source;
    EXPECT_NE(v.source.find("#define WG " + wg + " /* mblast:tune"), std::string::npos) << v.source;
  }
  EXPECT_EQ(sources.size(), 5u);
}

TEST(Tunables, TooManyCombinationsVaryOneKnobAtATime) {
  std::string src;
  for (int i = 0; i < 4; ++i) src += "#define K" + std::to_string(i) + " 1 // mblast:tune 1 2 3 4 5\n";
  auto vs = tunable_variants(src, "cuda", ".cuda.cu", 64);  // 5^4 = 625 > 64
  EXPECT_EQ(vs.size(), 16u);                                // 4 knobs x 4 other values
  for (const auto& v : vs) EXPECT_EQ(v.actions, (std::vector<std::string>{"cuda.block-size-tuning"}));
}

TEST(Tunables, MalformedAnnotationsSayWhere) {
  try {
    parse_tunables("int x;\n// mblast:tune 1 2\n");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_tunables("#define A 1 // mblast:tune\n"), UserError);
  EXPECT_TRUE(parse_tunables("#define A 1 // nothing to tune\n").empty());
}

}  // namespace
}  // namespace mblast::loop
