// The page `mblast report` writes: the inputs, then one section per plot (roofline, speedup per
// problem, fast_p, best cost against evaluations, the knowledge base's growth, the model plans),
// each with the table behind it, and in place of a plot that has nothing to draw the reason.
#pragma once

#include <string>
#include <vector>

#include "mblast/driver/report_inputs.h"

namespace mblast::report {

struct PageOptions {
  const KbHistory* kb = nullptr;  // --kb; null: the KB section says none was given
  std::string generated_at;       // ISO 8601, shown in the header
};

// The whole HTML document. Pure: the same inputs give the same page.
std::string report_html(const std::vector<ReportInput>& inputs, const PageOptions& options);

}  // namespace mblast::report
