// A live progress line for long commands (bench, optimize, import kernelbench, optimize-model).
//
// On a terminal: one status line, "[done/total] item: phase, elapsed, ~left", redrawn in place
// (\r, clear to end of line) at most a few times a second, and cleared before any other line is
// printed, so that result lines and log lines never mix with it. Not on a terminal (CI logs, a
// pipe): no status line at all, only the plain lines the command prints for each finished item.
// Disabled (--quiet, --json): nothing.
//
// The phase of an item comes from real events: the command says when it starts importing or
// timing a baseline, and evaluate() says when it sends the build request, when the first
// verification run arrives and when it asks for timing (Progress::phase_of_active()).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace mblast {

// Where a progress display writes. The program's is stderr (stderr_progress_output()); tests
// pass a function that collects the bytes and say whether to behave as on a terminal.
struct ProgressOutput {
  std::function<void(const std::string&)> write;  // the bytes, as they are
  bool terminal = false;
  int width = 0;  // columns; 0: unknown (80 assumed)
};

// stderr: a terminal when isatty(2) and TERM is not "dumb"; its width from the terminal (COLUMNS
// when that fails).
ProgressOutput stderr_progress_output();

struct ProgressOptions {
  bool enabled = true;              // false: nothing is written at all (--quiet, --json)
  double redraw_interval_s = 0.25;  // the line is redrawn at most this often
  bool ticker = true;               // a thread redraws it meanwhile, so that the elapsed time moves
  std::function<double()> clock;    // seconds on a monotonic clock (default: steady_clock); tests fake it
};

class Progress {
 public:
  // TASK names the command ("bench"); TOTAL is the number of items (0: not known).
  Progress(std::string task, std::size_t total, ProgressOutput out, ProgressOptions options = {});
  ~Progress();  // clears the line and stops the ticker
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The item now in work (a problem, a candidate) and its first phase.
  void start(const std::string& item, const std::string& phase = "");
  // The current item's phase (import, baseline, build, verify, time, ...).
  void phase(const std::string& phase);
  // The current item is finished, and counts as ITEMS of the total; LINE (its result), unless
  // empty, is printed as a line of its own.
  void done(const std::string& line, std::size_t items = 1);
  std::size_t total() const;
  // Any other line (a note, a warning): printed as a line of its own, never mixed with the status.
  void print(const std::string& line);
  void set_total(std::size_t total);

  // The newest Progress alive in this process, for events from code that has none at hand:
  // evaluate()'s phases, and lines other code prints (the optimize loop's notes, log lines).
  static void phase_of_active(const std::string& phase);
  // Prints LINE to stderr through the active Progress (cleared around it), or plainly when none.
  static void print_line(const std::string& line);
  // Clear the status line before other output to stderr, and draw it again after (log sinks).
  static void suspend_active();
  static void resume_active();

  // --- pure parts, tested on their own ---
  // 42 -> "42s", 185 -> "3m05s", 3720 -> "1h02m".
  static std::string format_duration(double seconds);
  // Seconds left: the mean time of the finished items (from the start to the last one's end, over
  // their count) times those left, less the time since the last one ended (at least 0); nullopt
  // before any item finished or without a total.
  static std::optional<double> estimate_left(double seconds_in_done_items, std::size_t done, std::size_t total,
                                             double current_item_seconds);
  // "[3/10] level1/relu: verify, 1m02s, ~4m10s left", cut to WIDTH - 1 columns (the item's name is
  // shortened first).
  static std::string status_text(std::size_t done, std::size_t total, const std::string& item, const std::string& phase,
                                 double elapsed, std::optional<double> left, int width);

 private:
  double now() const;
  std::string status_locked() const;
  void draw_locked(bool force);
  void clear_locked();
  void write(const std::string& bytes) const;
  void tick();

  std::string task_;
  std::size_t total_, done_ = 0;
  ProgressOutput out_;
  ProgressOptions o_;
  std::string item_, phase_;
  double t_start_ = 0, t_last_done_ = 0, done_seconds_ = 0;
  double last_draw_ = -1e9;
  std::string last_text_;  // what the line shows
  bool shown_ = false;     // a status line is on the screen
  bool suspended_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread ticker_;
  Progress* previous_active_ = nullptr;
};

}  // namespace mblast
