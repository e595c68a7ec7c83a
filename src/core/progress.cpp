#include "mblast/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mblast {

namespace {

// The newest Progress alive (each remembers the one before it). One lock for the pointer and
// for calls through it, so that a Progress is never used while it is being destroyed.
std::mutex g_active_mu;
Progress* g_active = nullptr;

const char* kClear = "\r\x1b[K";  // to the line's start, then erase to its end

}  // namespace

ProgressOutput stderr_progress_output() {
  ProgressOutput out;
  out.write = [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stderr);
    std::fflush(stderr);
  };
  const char* term = std::getenv("TERM");
  out.terminal = ::isatty(2) == 1 && !(term && std::strcmp(term, "dumb") == 0);
  struct winsize ws {};
  if (out.terminal && ::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    out.width = ws.ws_col;
  } else if (const char* c = std::getenv("COLUMNS")) {
    out.width = std::atoi(c);
  }
  return out;
}

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::optional<double> Progress::estimate_left(double seconds_in_done_items, std::size_t done, std::size_t total,
                                              double current_item_seconds) {
  if (done == 0 || total == 0 || done > total) return std::nullopt;
  const double mean = seconds_in_done_items / static_cast<double>(done);
  return std::max(0.0, mean * static_cast<double>(total - done) - (done < total ? current_item_seconds : 0.0));
}

std::string Progress::status_text(std::size_t done, std::size_t total, const std::string& item,
                                  const std::string& phase, double elapsed, std::optional<double> left, int width) {
  const std::string count =
      total ? "[" + std::to_string(done) + "/" + std::to_string(total) + "]" : "[" + std::to_string(done) + "]";
  std::string tail;
  if (!phase.empty()) tail += ": " + phase;
  tail += (tail.empty() ? ": " : ", ") + format_duration(elapsed);
  if (left) tail += ", ~" + format_duration(*left) + " left";
  const std::size_t room = static_cast<std::size_t>(std::max(20, (width > 0 ? width : 80) - 1));
  std::string name = item;
  const std::size_t fixed = count.size() + 1 + tail.size();
  if (fixed + name.size() > room) {  // the name goes first: keep its end, where the problem's stem is
    const std::size_t keep = room > fixed + 3 ? room - fixed - 3 : 0;
    name = keep ? "..." + name.substr(name.size() - keep) : "";
  }
  std::string s = count + (name.empty() ? "" : " " + name) + tail;
  if (s.size() > room) s.resize(room);
  return s;
}

Progress::Progress(std::string task, std::size_t total, ProgressOutput out, ProgressOptions options)
    : task_(std::move(task)), total_(total), out_(std::move(out)), o_(std::move(options)) {
  if (!o_.clock)
    o_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  t_start_ = t_last_done_ = now();
  {
    std::lock_guard<std::mutex> g(g_active_mu);
    previous_active_ = g_active;
    g_active = this;
  }
  if (o_.enabled && out_.terminal && o_.ticker) ticker_ = std::thread([this] { tick(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> g(g_active_mu);
    if (g_active == this) g_active = previous_active_;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard<std::mutex> l(mu_);
  clear_locked();
}

double Progress::now() const { return o_.clock(); }

void Progress::write(const std::string& bytes) const {
  if (o_.enabled && out_.write) out_.write(bytes);
}

std::string Progress::status_locked() const {
  const double t = now();
  const auto left = estimate_left(done_seconds_, done_, total_, t - t_last_done_);
  return status_text(done_, total_, item_, phase_, t - t_start_, left, out_.width);
}

void Progress::draw_locked(bool force) {
  if (!o_.enabled || !out_.terminal || suspended_) return;
  if (!force && item_.empty() && done_ == 0) return;  // nothing to say before the first item
  const double t = now();
  if (!force && t - last_draw_ < o_.redraw_interval_s) return;
  last_draw_ = t;
  std::string text = status_locked();
  if (!force && shown_ && text == last_text_) return;  // the ticker: nothing changed on the screen
  write(kClear + text);
  last_text_ = std::move(text);
  shown_ = true;
}

void Progress::clear_locked() {
  if (shown_) write(kClear);
  shown_ = false;
}

void Progress::tick() {
  std::unique_lock<std::mutex> l(mu_);
  const auto period = std::chrono::duration<double>(std::max(0.05, o_.redraw_interval_s));
  while (!stop_) {
    cv_.wait_for(l, period);
    if (!stop_) draw_locked(false);
  }
}

void Progress::start(const std::string& item, const std::string& phase) {
  std::lock_guard<std::mutex> l(mu_);
  item_ = item;
  phase_ = phase;
  draw_locked(true);  // a new item shows at once
}

void Progress::phase(const std::string& phase) {
  std::lock_guard<std::mutex> l(mu_);
  if (phase == phase_) return;
  phase_ = phase;
  draw_locked(false);  // the ticker shows it when this one is throttled
}

void Progress::done(const std::string& line, std::size_t items) {
  std::lock_guard<std::mutex> l(mu_);
  const double t = now();
  done_ += items;
  if (total_ && done_ > total_) total_ = done_;
  // Items are timed from one's end to the next's, so that the work between them (an optimize
  // step's proposals, say) is in the estimate too.
  done_seconds_ = t - t_start_;
  t_last_done_ = t;
  item_.clear();
  phase_.clear();
  if (!line.empty()) {
    clear_locked();
    write(line + "\n");
  }
  draw_locked(true);
}

std::size_t Progress::total() const {
  std::lock_guard<std::mutex> l(mu_);
  return total_;
}

void Progress::print(const std::string& line) {
  std::lock_guard<std::mutex> l(mu_);
  const bool was_shown = shown_;
  clear_locked();
  write(line + "\n");
  if (was_shown) draw_locked(true);
}

void Progress::set_total(std::size_t total) {
  std::lock_guard<std::mutex> l(mu_);
  total_ = total;
}

void Progress::phase_of_active(const std::string& phase) {
  std::lock_guard<std::mutex> g(g_active_mu);
  if (g_active) g_active->phase(phase);
}

void Progress::print_line(const std::string& line) {
  std::lock_guard<std::mutex> g(g_active_mu);
  if (g_active && g_active->o_.enabled) {
    g_active->print(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}

void Progress::suspend_active() {
  g_active_mu.lock();  // held until resume_active(): nothing redraws in between
  if (!g_active) return;
  std::lock_guard<std::mutex> l(g_active->mu_);
  g_active->clear_locked();
  g_active->suspended_ = true;
}

void Progress::resume_active() {
  if (g_active) {
    std::lock_guard<std::mutex> l(g_active->mu_);
    g_active->suspended_ = false;
    if (!g_active->item_.empty() || g_active->done_ > 0) g_active->draw_locked(true);
  }
  g_active_mu.unlock();
}

}  // namespace mblast
