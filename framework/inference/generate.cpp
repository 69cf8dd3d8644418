#include "framework/inference/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/batch.h"
#include "core/check.h"
#include "workloads/models/gpt.h"
#include "framework/inference/export.h"
#include "framework/recipe/factory.h"

namespace laconic {
namespace {

// The next token from one position's logits (see generate.h). `order` is scratch space.
std::int32_t draw(std::span<const float> logits, const GenerateOptions& o, std::mt19937_64& rng,
                  std::vector<std::int32_t>& order) {
  if (o.temperature == 0)
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  order.resize(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t k = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), order.size()) : order.size();
  // The k largest first, ties to the smaller id so that the cut does not depend on the sort.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  // Softmax in double, shifted by the largest logit (order[0]) so that exp cannot overflow.
  const double top = logits[order[0]];
  std::vector<double> weights(k);
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) sum += weights[i] = std::exp((logits[order[i]] - top) / o.temperature);
  // A uniform in [0, 1) from the top 53 bits: the same on every standard library, unlike
  // std::uniform_real_distribution.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
  double acc = 0;
  for (std::size_t i = 0; i < k; ++i) {
    acc += weights[i];
    if (u < acc) return order[i];
  }
  return order[k - 1];
}

}  // namespace

GenerateResult generate(const GenerateOptions& o) {
  if (o.tokens < 1) LC_INPUT_ERROR("generate: --tokens: expected at least 1, got ", o.tokens);
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    LC_INPUT_ERROR("generate: --temperature: expected a number >= 0 (0 = greedy), got ", o.temperature);
  if (o.top_k < 0) LC_INPUT_ERROR("generate: --top-k: expected 0 (no cut) or more, got ", o.top_k);
  const RunCheckpoint c = find_run_checkpoint(o.run);
  if (c.recipe.model.name != "gpt")
    LC_INPUT_ERROR(o.run, ": generate samples from GPT runs (model.name = \"gpt\"); this run's model is \"",
                   c.recipe.model.name.value, "\"");
  LoadOptions load;
  load.cache_dir = c.recipe.run.out_dir;
  load.write_cache = false;
  const std::optional<Tokenizer> tok = run_tokenizer(c.recipe, load);
  if (!tok)
    LC_INPUT_ERROR(o.run, ": no Laconic tokenizer for this run's data (data.name = \"", c.recipe.data.name.value,
                   "\" without a tokenizer.txt beside data.train_path)");
  CheckpointModel m = load_checkpoint_model(c);
  auto& gpt = dynamic_cast<Gpt&>(*m.model);
  const std::span<float> params = gpt.params().params();
  std::copy(m.params.begin(), m.params.end(), params.begin());
  const int vocab = gpt.options().vocab, context = gpt.options().seq_len;
  if (tok->vocab_size() != vocab)
    LC_INPUT_ERROR(o.run, ": the run's tokenizer has ", tok->vocab_size(), " tokens, its model ", vocab);

  GenerateResult r;
  r.checkpoint = c.info.dir;
  r.step = c.info.step;
  r.prompt_ids = tok->encode(o.prompt);
  std::vector<std::int32_t> ids{kSep};
  ids.insert(ids.end(), r.prompt_ids.begin(), r.prompt_ids.end());
  std::mt19937_64 rng(o.seed);
  std::vector<std::int32_t> order;
  Batch batch;
  batch.size = 1;
  ForwardOptions eval;
  eval.train = false;
  for (int n = 0; n < o.tokens; ++n) {
    const std::size_t T = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(context));
    batch.seq_len = static_cast<int>(T);
    batch.tokens.assign(ids.end() - static_cast<std::ptrdiff_t>(T), ids.end());
    // The model scores next-token targets; the inputs shifted by one (the last unknown: -1).
    batch.targets.assign(batch.tokens.begin() + 1, batch.tokens.end());
    batch.targets.push_back(-1);
    gpt.forward(batch, eval);
    const std::span<const float> last(gpt.logits() + (T - 1) * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
    const std::int32_t next = draw(last, o, rng, order);
    ids.push_back(next);
    r.ids.push_back(next);
  }
  std::vector<std::int32_t> shown = r.prompt_ids;
  shown.insert(shown.end(), r.ids.begin(), r.ids.end());
  r.text = tok->decode(shown);
  return r;
}

}  // namespace laconic
