#include "workloads/data/train_data.h"

#include "core/check.h"
#include "workloads/data/mlm.h"

namespace laconic {

TrainData image_data(std::shared_ptr<const ImageDataset> train, std::shared_ptr<const ImageDataset> test) {
  TrainData d;
  d.features = train->features();
  d.classes = train->classes;
  d.describe = detail::concat("images: ", train->size(), " train / ", test ? test->size() : 0, " test");
  d.train = std::make_shared<ImageSource>(std::move(train));
  if (test) d.eval = std::make_shared<ImageSource>(std::move(test));
  return d;
}

TrainData token_data(TokenStream train, TokenStream eval, int seq_len) {
  TrainData d;
  d.vocab = train.vocab;
  d.seq_len = seq_len;
  const bool evaluated = eval.windows(seq_len) > 0;
  d.baseline_loss = unigram_entropy(evaluated ? eval : train, seq_len);
  d.describe = detail::concat("tokens: ", train.tokens.size(), " train / ", eval.tokens.size(), " eval");
  d.train = std::make_shared<LmSource>(std::make_shared<TokenStream>(std::move(train)), seq_len);
  if (evaluated) d.eval = std::make_shared<LmSource>(std::make_shared<TokenStream>(std::move(eval)), seq_len);
  return d;
}

}  // namespace laconic
