// What a run trains and evaluates on, as the model factories and the step loop see it: the train
// and eval sources and the sizes a model is built for, from datasets in memory or loaded from the
// recipe's [data] (framework/recipe/factory.h's load_data, through the registry).
#pragma once

#include <limits>
#include <memory>
#include <string>

#include "workloads/data/fashion_mnist.h"
#include "workloads/data/lm.h"
#include "workloads/data/source.h"

namespace laconic {

// Datasets are loaded once per process and shared read-only by its ranks.
struct TrainData {
  std::shared_ptr<const DataSource> train;
  std::shared_ptr<const DataSource> eval;  // null: no evaluation
  int features = 0, classes = 0;           // image data: what the MLP is built for
  int vocab = 0, seq_len = 0;              // token data: what BERT is built for
  double baseline_loss = std::numeric_limits<double>::quiet_NaN();  // text: unigram entropy (nats)
  std::string describe;
};

// Image data from datasets in memory (tests, synthetic data).
TrainData image_data(std::shared_ptr<const ImageDataset> train, std::shared_ptr<const ImageDataset> test);
// Next-token data (the GPT's) from streams in memory: windows of seq_len, the unigram baseline
// of the eval stream (of train when eval has no window, and then no evaluation).
TrainData token_data(TokenStream train, TokenStream eval, int seq_len);

struct LoadOptions {
  std::string cache_dir;     // where the trained tokenizer is cached ("" = do not cache)
  bool write_cache = true;   // false on all but one process of an MPI job
  std::string* note = nullptr;  // receives what loading did (e.g. "tokenizer loaded from ...")
};

}  // namespace laconic
