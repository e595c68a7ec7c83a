// Log lines (spdlog, on stderr) and the live progress line share the terminal: each log line is
// written with the progress line cleared first and drawn again after it (include/mblast/progress.h).
#include "mblast/driver/progress_log.h"

#include <memory>
#include <vector>

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include "mblast/progress.h"

namespace mblast {

namespace {

class AroundProgressSink final : public spdlog::sinks::sink {
 public:
  explicit AroundProgressSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    Progress::suspend_active();
    inner_->log(msg);
    inner_->flush();
    Progress::resume_active();
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  spdlog::sink_ptr inner_;
};

}  // namespace

void route_logs_around_progress() {
  auto logger = spdlog::default_logger();
  if (!logger) return;
  for (auto& s : logger->sinks())
    if (!std::dynamic_pointer_cast<AroundProgressSink>(s)) s = std::make_shared<AroundProgressSink>(s);
}

}  // namespace mblast
