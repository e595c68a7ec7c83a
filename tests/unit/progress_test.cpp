// The live progress line (include/mblast/progress.h) against a fake terminal and a fake clock:
// formatting, the estimate of what is left, throttling, clearing before other lines, and the
// plain lines it gives where the output is not a terminal.
#include "mblast/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace mblast {
namespace {

const std::string kClear = "\r\x1b[K";

struct Fake {
  std::string bytes;
  double t = 100.0;
  ProgressOutput out(bool terminal, int width = 80) {
    ProgressOutput o;
    o.write = [this](const std::string& s) { bytes += s; };
    o.terminal = terminal;
    o.width = width;
    return o;
  }
  ProgressOptions options(bool enabled = true) {
    ProgressOptions o;
    o.enabled = enabled;
    o.ticker = false;  // draws only on events: the tests decide when time passes
    o.redraw_interval_s = 0.25;
    o.clock = [this] { return t; };
    return o;
  }
  std::string take() { return std::exchange(bytes, ""); }
};

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(Progress::format_duration(0), "0s");
  EXPECT_EQ(Progress::format_duration(42.4), "42s");
  EXPECT_EQ(Progress::format_duration(59.6), "1m00s");
  EXPECT_EQ(Progress::format_duration(185), "3m05s");
  EXPECT_EQ(Progress::format_duration(3720), "1h02m");
  EXPECT_EQ(Progress::format_duration(-3), "0s");
}

TEST(Progress, EstimatesWhatIsLeftFromTheFinishedItems) {
  EXPECT_FALSE(Progress::estimate_left(0, 0, 10, 0).has_value());   // nothing finished yet
  EXPECT_FALSE(Progress::estimate_left(30, 3, 0, 0).has_value());   // no total
  EXPECT_DOUBLE_EQ(*Progress::estimate_left(30, 3, 10, 0), 70.0);   // 10 s each, 7 left
  EXPECT_DOUBLE_EQ(*Progress::estimate_left(30, 3, 10, 4), 66.0);   // the current one is 4 s in
  EXPECT_DOUBLE_EQ(*Progress::estimate_left(30, 3, 10, 500), 0.0);  // never below 0
  EXPECT_DOUBLE_EQ(*Progress::estimate_left(30, 3, 3, 9), 0.0);     // all done
}

TEST(Progress, StatusTextAndItsWidth) {
  EXPECT_EQ(Progress::status_text(3, 10, "level1/relu", "verify", 62, 250.0, 80),
            "[3/10] level1/relu: verify, 1m02s, ~4m10s left");
  EXPECT_EQ(Progress::status_text(0, 10, "level1/relu", "", 5, std::nullopt, 80), "[0/10] level1/relu: 5s");
  EXPECT_EQ(Progress::status_text(2, 0, "x", "build", 5, std::nullopt, 80), "[2] x: build, 5s");
  // A narrow terminal: the name is cut from the front (its stem stays), never the line past width - 1.
  const std::string s =
      Progress::status_text(3, 10, "a_very_long_level_name/and_a_long_problem_stem", "verify", 62, 250.0, 50);
  EXPECT_EQ(s.size(), 49u);
  EXPECT_EQ(s.substr(0, 10), "[3/10] ...");
  EXPECT_EQ(s, "[3/10] ...roblem_stem: verify, 1m02s, ~4m10s left");
}

TEST(Progress, TerminalRedrawsInPlaceThrottledAndClearsBeforeLines) {
  Fake f;
  {
    Progress p("bench", 3, f.out(true), f.options());
    EXPECT_EQ(f.take(), "");  // nothing until an item starts
    p.start("level1/relu", "import");
    EXPECT_EQ(f.take(), kClear + "[0/3] level1/relu: import, 0s");
    f.t += 0.1;
    p.phase("baseline");  // within the interval: not drawn now
    EXPECT_EQ(f.take(), "");
    f.t += 0.2;
    p.phase("verify");  // 0.3 s since the last draw
    EXPECT_EQ(f.take(), kClear + "[0/3] level1/relu: verify, 0s");
    f.t += 9.7;
    p.done("[1/3] level1/relu: correct");  // the line is cleared, the result printed, the line drawn again
    EXPECT_EQ(f.take(), kClear + "[1/3] level1/relu: correct\n" + kClear + "[1/3]: 10s, ~20s left");
    p.start("level1/clamp", "import");
    f.t += 5;
    p.print("a note");
    EXPECT_EQ(f.take(), kClear + "[1/3] level1/clamp: import, 10s, ~20s left" + kClear + "a note\n" + kClear +
                            "[1/3] level1/clamp: import, 15s, ~15s left");
  }
  EXPECT_EQ(f.take(), kClear);  // gone when the command ends
}

TEST(Progress, TheEstimateCountsTheTimeBetweenItems) {
  Fake f;
  Progress p("optimize", 4, f.out(true), f.options());
  p.start("evaluation 1");
  f.t += 10;
  p.done("");
  f.t += 5;  // an optimize step's proposals: no item in work, but part of what each one costs
  p.start("evaluation 2");
  f.t += 5;
  f.take();
  p.done("");  // 2 done in 20 s: 10 s each, 2 left
  EXPECT_EQ(f.take(), kClear + "[2/4]: 20s, ~20s left");
}

TEST(Progress, NotATerminalGivesPlainLinesOnly) {
  Fake f;
  {
    Progress p("bench", 2, f.out(false), f.options());
    p.start("level1/relu", "import");
    p.phase("verify");
    f.t += 1;
    p.done("[1/2] level1/relu: correct");
    p.print("a note");
    p.start("level1/clamp");
    p.done("");  // an item without a line of its own
  }
  EXPECT_EQ(f.bytes, "[1/2] level1/relu: correct\na note\n");
  EXPECT_EQ(f.bytes.find('\r'), std::string::npos);
}

TEST(Progress, DisabledWritesNothing) {
  Fake f;
  {
    Progress p("bench", 2, f.out(true), f.options(false));
    p.start("x", "import");
    p.done("[1/2] x: correct");
    p.print("note");
  }
  EXPECT_EQ(f.bytes, "");
}

TEST(Progress, EventsFromDeepInsideReachTheNewestAlive) {
  Fake outer_out, inner_out;
  Progress outer("bench", 2, outer_out.out(true), outer_out.options());
  outer.start("p", "candidate");
  outer_out.take();
  outer_out.t += 1;
  Progress::phase_of_active("build");
  EXPECT_EQ(outer_out.take(), kClear + "[0/2] p: build, 1s");
  {
    Progress inner("optimize", 5, inner_out.out(true), inner_out.options());
    inner.start("evaluation 1");
    inner_out.take();
    inner_out.t += 1;
    Progress::phase_of_active("verify");
    EXPECT_EQ(inner_out.take(), kClear + "[0/5] evaluation 1: verify, 1s");
    EXPECT_EQ(outer_out.take(), "");
  }
  outer_out.t += 1;
  Progress::phase_of_active("time");  // the inner one is gone: the outer one again
  EXPECT_EQ(outer_out.take(), kClear + "[0/2] p: time, 2s");
  // Other output (a log line) clears the line first and draws it again after.
  Progress::suspend_active();
  EXPECT_EQ(outer_out.take(), kClear);
  Progress::resume_active();
  EXPECT_EQ(outer_out.take(), kClear + "[0/2] p: time, 2s");
}

TEST(Progress, TheTickerMovesTheClockWithoutEvents) {
  std::string bytes;
  std::mutex mu;
  ProgressOutput o;
  o.write = [&](const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    bytes += s;
  };
  o.terminal = true;
  ProgressOptions opt;
  opt.redraw_interval_s = 0.05;
  double t = 0;
  std::mutex tmu;
  opt.clock = [&] {
    std::lock_guard<std::mutex> l(tmu);
    return t;
  };
  Progress p("bench", 1, o, opt);
  p.start("x", "verify");
  {
    std::lock_guard<std::mutex> l(tmu);
    t = 7;  // no event after this: only the ticker can show it
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (bytes.find("x: verify, 7s") != std::string::npos) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the ticker never redrew the line";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace
}  // namespace mblast
