// A candidate that is not source text is refused with one line before the build; a failed
// build shows one line of its log, and the whole log stays in the result and in a file.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mblast/candidate_file.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/measure/evaluate.h"
#include "mblast/paths.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

class Scratch {
 public:
  Scratch() {
    path_ =
        fs::temp_directory_path() / ("mblast-cand-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Scratch() { fs::remove_all(path_); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return path_ / name;
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// The one-line reason read_candidate_source gives, or "" when it accepts the file.
std::string refusal(const fs::path& file) {
  try {
    read_candidate_source(file);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const fs::path& file, const std::string& needle) {
  const std::string msg = refusal(file);
  EXPECT_NE(msg.find(needle), std::string::npos) << file << ": " << msg;
  EXPECT_EQ(msg.rfind(file.string() + ": ", 0), 0u) << "names the file first: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  EXPECT_LT(msg.size(), 300u) << msg;
}

TEST(CandidateFile, BinaryAndNonSourceFilesAreRefusedWithOneLine) {
  Scratch s;
  expect_refused("/bin/ls", "an ELF binary");
  expect_refused(s.write("x.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16)), "a PNG image");
  expect_refused(s.write("x.zip", std::string("PK\x03\x04\x14\0\0\0", 8)), "a ZIP archive");
  expect_refused(s.write("x.gz", std::string("\x1f\x8b\x08\0", 4)), "gzip-compressed");
  expect_refused(s.write("nul.c", std::string("int x;\0\0\0garbage\n", 18)),
                 "a NUL byte at offset 6, line 1, column 7");
  expect_refused(s.write("late-nul.c", "// fine\n" + std::string(5000, ' ') + std::string(1, '\0')),
                 "a NUL byte at offset 5008");
  expect_refused(s.write("ctl.c", "int x;\n\x01\x02"), "control byte 0x01 at offset 7, line 2, column 1");
  // Latin-1 text: the JSON request would replace the byte, so the code built would not be the file.
  expect_refused(s.write("latin1.c", "// caf\xe9\nint x;\n"),
                 "not UTF-8 text (byte 0xe9 at offset 6, line 1, column 7)");
  expect_refused(s.write("overlong.c", "int x; // \xc0\xaf\n"), "not UTF-8 text (byte 0xc0");
  expect_refused(s.write("surrogate.c", "int x; // \xed\xa0\x80\n"), "not UTF-8 text (byte 0xed");
  expect_refused(s.write("empty.c", ""), "the candidate is empty");
  expect_refused(s.write("blank.c", " \n\t\n"), "the candidate is empty");
  expect_refused(s.path(), "is a folder");
  expect_refused(s.path() / "missing.c", "no such candidate file");
  expect_refused("/dev/null", "not a regular file");
}

TEST(CandidateFile, SourceTextIsAccepted) {
  Scratch s;
  EXPECT_EQ(refusal(s.write(
                "utf8.c", "\xef\xbb\xbf// \xe6\x95\xb0\xe5\xad\x97, caf\xc3\xa9, \xf0\x9f\x98\x80\r\n\f\tint x;\v\n")),
            "")
      << "a BOM, CJK, accents, an emoji, CRLF, form feed, tabs";
  // Every candidate the project ships is source: the check must not refuse any of them.
  int n = 0;
  for (const fs::path root : {data_dir() / "problems", data_dir() / "benchmarks" / "suite" / "candidates"})
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file() && e.path().string().find("/candidates/") != std::string::npos) {
        EXPECT_EQ(refusal(e.path()), "") << e.path();
        ++n;
      }
  EXPECT_GT(n, 50);
}

// The check runs before anything else of an eval: no runner, no data, no compiler.
TEST(CandidateFile, EvalRefusesABinaryBeforeTheBuild) {
  const Problem p = load_problem(data_dir() / "problems" / "relu");
  Scratch cache;
  ::setenv("MBLAST_CACHE_DIR", cache.path().c_str(), 1);
  EvalOptions o;
  o.runner = RunnerAddress{"ssh", "nobody@unreachable.invalid"};  // reaching it would fail differently
  try {
    evaluate(p, find_target("pocl-cpu"), "/bin/ls", o);
    ADD_FAILURE() << "a binary was evaluated";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "/bin/ls: an ELF binary (an executable, library or object file), not source code");
  }
  ::unsetenv("MBLAST_CACHE_DIR");
  EXPECT_TRUE(fs::is_empty(cache.path())) << "nothing built, cached or kept";
}

const char* kGccLog =
    "/home/u/.cache/mblast/build/tmp-18016-664947584/candidate.cpp: In function 'void f()':\n"
    "/home/u/.cache/mblast/build/tmp-18016-664947584/candidate.cpp:3:7: warning: unused variable 'y' "
    "[-Wunused-variable]\n"
    "    3 |   int y;\n"
    "/home/u/.cache/mblast/build/tmp-18016-664947584/candidate.cpp:9:1: error: 'garbage' does not name a type\n"
    "    9 | garbage\n"
    "      | ^~~~~~~\n"
    "/home/u/.cache/mblast/build/tmp-18016-664947584/candidate.cpp:12:1: error: expected ';'\n";

TEST(CandidateFile, FirstErrorLineOfCompilerLogs) {
  EXPECT_EQ(first_error_line(kGccLog, "/work/k.cpp"), "/work/k.cpp:9:1: error: 'garbage' does not name a type");
  EXPECT_EQ(first_error_line(kGccLog),
            "/home/u/.cache/mblast/build/tmp-18016-664947584/candidate.cpp:9:1: error: 'garbage' does not name a type");
  EXPECT_EQ(
      first_error_line("/tmp/b/candidate.cu(14): error: identifier \"foo\" is undefined\n\n1 error detected\n", "k.cu"),
      "k.cu(14): error: identifier \"foo\" is undefined");
  EXPECT_EQ(first_error_line("/usr/bin/ld: /tmp/b/candidate.o: in function `mblast_run':\n"
                             "candidate.c:(.text+0x1c): undefined reference to `helper'\n"
                             "collect2: error: ld returned 1 exit status\n"),
            "candidate.c:(.text+0x1c): undefined reference to `helper'");
  EXPECT_EQ(first_error_line("candidate.cu(3): warning: unused\r\n\n[mblast] nvcc did not finish within 180 s\n\n"),
            "[mblast] nvcc did not finish within 180 s")
      << "no error line: the last line, which says why the build stopped";
  EXPECT_EQ(first_error_line(std::string(1000, 'x') + " error: long\n").size(), 300u);
}

// A failed build prints its first error line and where the full log is kept; the log itself
// is not printed, and stays whole in the result and in the kept file.
TEST(CandidateFile, FailedBuildPrintsOneLineAndKeepsTheLog) {
  Scratch cache;
  ::setenv("MBLAST_CACHE_DIR", cache.path().c_str(), 1);
  std::string log = kGccLog;
  for (int i = 0; i < 200; ++i) log += "note: line " + std::to_string(i) + " of a long log\n";
  const nlohmann::json r = {{"problem", "relu"},
                            {"target", "pocl-cpu"},
                            {"backend", "opencl"},
                            {"candidate", "/work/k.cpp"},
                            {"correct", false},
                            {"failure_kind", "build_failed"},
                            {"reason", "the candidate did not compile"},
                            {"build", {{"log", log}, {"cached", false}}}};
  const std::string out = format_eval_result(r);
  ::unsetenv("MBLAST_CACHE_DIR");
  EXPECT_NE(out.find("\n          /work/k.cpp:9:1: error: 'garbage' does not name a type\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("note: line"), std::string::npos) << "the whole log is not printed:\n" << out;
  EXPECT_EQ(out.find("does not name a type\n    9 |"), std::string::npos) << out;
  const std::string marker = "(full build log: ";
  const size_t at = out.find(marker);
  ASSERT_NE(at, std::string::npos) << out;
  const fs::path kept = out.substr(at + marker.size(), out.find(')', at) - at - marker.size());
  EXPECT_EQ(kept.parent_path(), cache.path() / "build-logs");
  EXPECT_EQ(read_file(kept), log) << "the kept log is the whole log";
  EXPECT_LT(std::count(out.begin(), out.end(), '\n'), 8) << out;
}

}  // namespace
}  // namespace mblast
