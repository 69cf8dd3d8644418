// Which protocol a comparison followed, read from its runs' resolved recipes and said in the
// report's opening lines, in the terms of the papers it reproduces (DiLoCo's Table 2 compares at
// equal data and at equal updates): whether every variant trained the same examples ("tokens"),
// the same optimizer steps ("updates"), with which global batch, and from which start.
#pragma once

#include <string>
#include <vector>

#include "framework/report/runs.h"

namespace laconic {

// "- **Budget**: ..." and "- **Start**: ..." markdown lines (each ending in a newline). A
// variant's seeds share its budget, so runs named "<variant>/seed<k>" count once.
std::string protocol_markdown(const std::vector<RunResult>& runs);

}  // namespace laconic
