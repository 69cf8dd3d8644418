#include "framework/report/protocol.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "framework/report/seeds.h"

namespace laconic {
namespace {

struct Budgeted {
  std::string name;
  std::int64_t steps = 0, global_batch = 0;
  std::string init_from;  // "" = the seed's initialisation
};

std::string unquoted(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

// One entry per variant (its first seed's run).
std::vector<Budgeted> variants_of(const std::vector<RunResult>& runs) {
  std::vector<Budgeted> out;
  std::set<std::string> seen;
  for (const RunResult& r : runs) {
    const auto slash = r.name.rfind("/seed");
    const std::string name = slash == std::string::npos ? r.name : r.name.substr(0, slash);
    if (!seen.insert(name).second) continue;
    out.push_back({name, r.steps, global_batch_of(r), unquoted(r.recipe_value("model.init_from"))});
  }
  return out;
}

template <class F>
bool all_same(const std::vector<Budgeted>& v, F key) {
  return std::all_of(v.begin(), v.end(), [&](const Budgeted& b) { return key(b) == key(v.front()); });
}

std::string each(const std::vector<Budgeted>& v, const char* what, std::int64_t (*value)(const Budgeted&)) {
  std::string out;
  for (const Budgeted& b : v) out += (out.empty() ? "" : ", ") + b.name + " " + std::to_string(value(b)) + " " + what;
  return out;
}

std::int64_t steps_of(const Budgeted& b) { return b.steps; }
std::int64_t examples_of(const Budgeted& b) { return b.steps * b.global_batch; }

}  // namespace

std::string protocol_markdown(const std::vector<RunResult>& runs) {
  const std::vector<Budgeted> v = variants_of(runs);
  if (v.size() < 2 || std::any_of(v.begin(), v.end(), [](const Budgeted& b) { return b.global_batch == 0; })) return "";
  const bool tokens = all_same(v, examples_of), updates = all_same(v, steps_of);
  std::ostringstream os;
  os << "- **Budget**: ";
  if (tokens && updates)
    os << "matched by examples (tokens) and by updates: every variant trains " << v.front().steps << " optimizer steps of "
       << v.front().global_batch << " examples (" << examples_of(v.front()) << " examples)\n";
  else if (tokens)
    os << "matched by examples (tokens), " << examples_of(v.front()) << " each, not by updates (" << each(v, "steps", steps_of)
       << ")\n";
  else if (updates)
    os << "matched by updates, " << v.front().steps << " steps each, not by examples (" << each(v, "examples", examples_of) << ")\n";
  else
    os << "**not matched** by examples nor by updates (" << each(v, "examples", examples_of) << "; "
       << each(v, "steps", steps_of) << ")\n";
  os << "- **Start**: ";
  if (all_same(v, [](const Budgeted& b) { return b.init_from; }))
    os << (v.front().init_from.empty() ? "from scratch (each seed's initialisation)"
                                       : "every variant from the same weights, `" + v.front().init_from + "`")
       << "\n";
  else
    os << "**different starts** (model.init_from differs between variants)\n";
  return os.str();
}

}  // namespace laconic
