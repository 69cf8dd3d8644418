// `trainer generate RUN --prompt TEXT --tokens N`: a look at what a GPT run learnt, sampled from
// its newest checkpoint on the host.
//
// The context starts with [SEP], the token that precedes every document in the training stream
// (lm.h), then the prompt's tokens; each step runs the model on the last seq_len tokens of the
// context and draws the next token from the last position's logits z:
//   temperature 0: argmax z (the smallest id among ties), deterministic;
//   otherwise:     p_i proportional to exp(z_i / temperature) over the top_k largest z (all when
//                  top_k is 0), drawn with a generator seeded by `seed`: the same seed, the same text.
// Exactly `tokens` tokens are drawn ([SEP] too: it reads " [SEP]", a document's end).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laconic {

struct GenerateOptions {
  std::string run;            // a run directory or a checkpoint directory (find_run_checkpoint)
  std::string prompt;
  int tokens = 50;            // tokens to draw (>= 1)
  double temperature = 1.0;   // >= 0; 0 = greedy
  int top_k = 0;              // >= 0; 0 = no cut
  std::uint64_t seed = 0;
};

struct GenerateResult {
  std::string checkpoint;                // the checkpoint directory sampled from
  std::int64_t step = 0;
  std::vector<std::int32_t> prompt_ids;  // the prompt's tokens (without the leading [SEP])
  std::vector<std::int32_t> ids;         // the tokens drawn
  std::string text;                      // decode(prompt_ids + ids): the prompt as the tokenizer reads it, then the rest
};

// Throws InputError (one line naming the run) for a run that is not a GPT's, has no complete
// checkpoint or no Laconic tokenizer, and for options out of range.
GenerateResult generate(const GenerateOptions& options);

}  // namespace laconic
