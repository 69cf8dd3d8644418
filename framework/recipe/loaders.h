// The built-in datasets a recipe's [data] names (data.name = "fashion_mnist", "text", "tokens"),
// registered as a user's datasets are (factory.cpp), and the tokenizer a text run trained with.
#pragma once

#include <optional>

#include "workloads/data/tokenizer.h"
#include "workloads/data/train_data.h"
#include "framework/recipe/recipe.h"

namespace laconic {

// Each throws InputError for missing or corrupt files. Only the text loader reads opts (its
// tokenizer cache); the others take them to be registered alike.
TrainData load_fashion_mnist_data(const Recipe& r, const LoadOptions& opts);
TrainData load_text_data(const Recipe& r, const LoadOptions& opts);
TrainData load_token_data(const Recipe& r, const LoadOptions& opts);  // pre-tokenized files (llm.c's .bin)

// The Laconic tokenizer a run of `recipe` trained with: for data.name = "text", the one
// load_data builds (from the cache under opts.cache_dir when it is there, else trained again:
// the same corpus and options give the same merges); for "tokens", the tokenizer.txt that
// trainer tokenize wrote beside data.train_path; otherwise none (files of another tokenizer).
std::optional<Tokenizer> run_tokenizer(const Recipe& recipe, const LoadOptions& opts);

}  // namespace laconic
