// The variants of `trainer compare --recipe R --vary ...` (and the configurations of --tune):
// a --vary flag parsed into an axis, and the axes' cartesian product, each variant a name and the
// recipe overrides that make it.
#pragma once

#include <string>
#include <vector>

namespace laconic {

// One --vary flag: "section.key=v1,v2,...". Values are split on commas outside [] and quotes, so
// "model.hidden=[256,128],[64]" is two values.
struct VaryAxis {
  std::string key;                  // "sync.strategy"
  std::vector<std::string> values;  // {"allreduce", "topk"}
};

// Throws InputError (one line, naming the flag) for a missing '=', a key that is not
// "section.key", an empty value list or an empty value. Whether the key exists in the recipe
// schema is checked by load_recipe when the variants are resolved.
VaryAxis parse_vary(const std::string& spec);

struct Variant {
  std::string name;                     // also its run directory name under --out
  std::vector<std::string> assignments;  // "sync.strategy=topk": recipe overrides, in axis order
};

// The cartesian product of the axes, first axis outermost (the first variant is the baseline).
// Names: with one axis the value ("topk"); with several "key=value" pairs joined by ','
// ("strategy=topk,ratio=0.01"), key = its last component unless two axes share it. Characters
// other than [A-Za-z0-9_.+-] become '-', and duplicate names get "-2", "-3" appended. Throws
// InputError when two axes vary the same key.
std::vector<Variant> make_variants(const std::vector<VaryAxis>& axes);

}  // namespace laconic
