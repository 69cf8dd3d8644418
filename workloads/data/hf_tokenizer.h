// Laconic's BPE (workloads/data/tokenizer.h) as a Hugging Face `tokenizers` file (tokenizer.json,
// what PreTrainedTokenizerFast.from_pretrained and Tokenizer.from_file read), so that a run's
// exported weights come with the tokenizer they were trained on.
//
// The pipeline that reproduces Tokenizer::encode, in the schema of tokenizers' serialisation:
//   normalizer     Lowercase (when the tokenizer lowercases), else none
//   pre_tokenizer  Sequence of
//                    Split "[\x09-\x0d\x20]+" Removed      (whitespace only separates)
//                    Split one ASCII non-letter, non-digit Isolated   (punctuation: words of their own)
//                    ByteLevel add_prefix_space, no regex  (" word", bytes as GPT-2's printable characters)
//   model          BPE: vocab (ids as ours: [PAD] [UNK] [CLS] [SEP] [MASK], 256 bytes, merges), merges
//                  in the order learnt (rank = order, as Tokenizer::encode applies them)
//   decoder        ByteLevel
//   added_tokens   the five special tokens
// Differences, where the schema cannot say ours: Lowercase folds every Unicode letter where ours
// folds A-Z only; Hugging Face matches the special tokens' text ("[SEP]") in the input where ours
// spells it as punctuation and letters; its decode keeps the first word's leading space.
#pragma once

#include <string>

#include "workloads/data/tokenizer.h"

namespace laconic {

// The tokenizer.json text. Throws InputError when two merges made the same bytes under different
// ids (the file maps each string to one id).
std::string hf_tokenizer_json(const Tokenizer& tokenizer);

}  // namespace laconic
