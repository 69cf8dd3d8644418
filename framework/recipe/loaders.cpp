#include "framework/recipe/loaders.h"

#include <filesystem>

#include "core/check.h"
#include "workloads/data/lm.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/token_files.h"

namespace laconic {
namespace {

std::string data_path(const Recipe& r) {
  if (r.data.path != "default") return r.data.path;
  return r.data.name == "text" ? kFortunesDir : kFashionMnistDir;
}

// The documents of a data.name = "text" recipe; `read` receives the loader's line on its files.
std::vector<std::string> text_documents(const Recipe& r, const LoadOptions& opts, std::string& read) {
  const std::string path = data_path(r);
  TextCorpusOptions co;
  // The fortune databases are files without an extension; a folder of the user's, data.extensions.
  co.extensions = r.data.path == "default" ? std::vector<std::string>{""} : r.data.extensions;
  co.exclude = {r.run.out_dir};
  if (!opts.cache_dir.empty()) co.exclude.push_back(opts.cache_dir);
  TextCorpusReport report;
  std::vector<std::string> docs = load_text_corpus(path, co, &report);
  read = report.describe(path);
  return docs;
}

// The tokenizer of a text recipe, trained on `docs` or loaded from the cache under opts.cache_dir.
Tokenizer text_tokenizer(const Recipe& r, const LoadOptions& opts, std::span<const std::string> docs, std::string& note) {
  TokenizerOptions to;
  to.vocab_size = r.data.vocab_size;
  to.lowercase = r.data.lowercase;
  if (opts.cache_dir.empty()) return Tokenizer::train(docs, to);
  const std::string cache = Tokenizer::cache_path(opts.cache_dir, docs, to);
  if (!opts.write_cache && !std::filesystem::exists(cache)) return Tokenizer::train(docs, to);
  if (opts.write_cache) std::filesystem::create_directories(opts.cache_dir);
  return Tokenizer::load_or_train(cache, docs, to, &note);
}

}  // namespace

TrainData load_fashion_mnist_data(const Recipe& r, const LoadOptions&) {
  const std::string path = data_path(r);
  TrainData d = image_data(std::make_shared<ImageDataset>(load_fashion_mnist(path, Split::train)),
                           std::make_shared<ImageDataset>(load_fashion_mnist(path, Split::test)));
  d.describe = "Fashion-MNIST " + path + ": " + d.describe.substr(d.describe.find(' ') + 1);
  return d;
}

TrainData load_text_data(const Recipe& r, const LoadOptions& opts) {
  const std::string path = data_path(r);
  std::string read, note;
  const std::vector<std::string> docs = text_documents(r, opts, read);
  const Tokenizer tok = text_tokenizer(r, opts, docs, note);
  if (opts.note) *opts.note = note;
  const std::string noted = note.empty() ? "" : " (" + note + ")";
  if (r.model.name == "gpt") {
    LmSplits splits = build_lm_streams(docs, tok, r.data.eval_fraction);
    const std::int64_t train_windows = splits.train.windows(r.data.seq_len);
    const std::int64_t eval_windows = splits.eval.windows(r.data.seq_len);
    if (train_windows == 0 || (r.data.eval_fraction > 0 && eval_windows == 0))
      LC_INPUT_ERROR(path, ": the text corpus (", docs.size(), " documents) is too small: ", train_windows, " train / ",
                     eval_windows, " eval windows of data.seq_len = ", r.data.seq_len, " tokens");
    std::string describe = detail::concat("text: ", read, "; ", docs.size(), " documents, ", splits.train.tokens.size(),
                                          " train / ", splits.eval.tokens.size(), " eval tokens (", train_windows, " / ",
                                          eval_windows, " windows of ", r.data.seq_len, "), vocabulary ", tok.vocab_size(),
                                          noted);
    TrainData lm = token_data(std::move(splits.train), std::move(splits.eval), r.data.seq_len);
    lm.describe = std::move(describe);
    return lm;
  }
  TrainData d;
  TextDatasetOptions dopts;
  dopts.seq_len = r.data.seq_len;
  dopts.eval_fraction = r.data.eval_fraction;
  TextSplits splits = build_text_datasets(docs, tok, dopts);
  MlmOptions mopts;
  mopts.mask_prob = r.data.mask_prob;
  d.vocab = tok.vocab_size();
  d.seq_len = r.data.seq_len;
  d.baseline_loss = unigram_entropy(splits.eval.size() > 0 ? splits.eval : splits.train);
  d.describe = detail::concat("text: ", read, "; ", docs.size(), " documents, ", splits.train.size(),
                              " train / ", splits.eval.size(), " eval sequences of ", r.data.seq_len,
                              " tokens, vocabulary ", d.vocab, noted);
  auto train = std::make_shared<TokenDataset>(std::move(splits.train));
  d.train = std::make_shared<MlmSource>(train, mopts);
  if (splits.eval.size() > 0) d.eval = std::make_shared<MlmSource>(std::make_shared<TokenDataset>(std::move(splits.eval)), mopts);
  return d;
}

// The recipe's vocabulary is the files'.
TrainData load_token_data(const Recipe& r, const LoadOptions&) {
  const int T = r.data.seq_len;
  TokenStream train = read_token_files(r.data.train_path.path, r.data.token_format, r.data.vocab_size, "data.train_path");
  TokenStream eval;
  eval.vocab = r.data.vocab_size;
  if (!r.data.val_path.path.empty())
    eval = read_token_files(r.data.val_path.path, r.data.token_format, r.data.vocab_size, "data.val_path");
  if (train.windows(T) == 0)
    LC_INPUT_ERROR(r.data.train_path.path, ": data.train_path: ", train.tokens.size(),
                   " tokens, too few for one window of data.seq_len = ", T, " tokens");
  if (!r.data.val_path.path.empty() && eval.windows(T) == 0)
    LC_INPUT_ERROR(r.data.val_path.path, ": data.val_path: ", eval.tokens.size(),
                   " tokens, too few for one window of data.seq_len = ", T, " tokens");
  const std::string describe = detail::concat("tokens ", r.data.train_path.path, ": ", train.tokens.size(), " train / ",
                              eval.tokens.size(), " eval tokens (", train.windows(T), " / ", eval.windows(T),
                              " windows of ", T, "), vocabulary ", r.data.vocab_size);
  TrainData d = token_data(std::move(train), std::move(eval), T);
  d.describe = describe;
  return d;
}

std::optional<Tokenizer> run_tokenizer(const Recipe& r, const LoadOptions& opts) {
  if (r.data.name == "text") {
    std::string read, note;
    const std::vector<std::string> docs = text_documents(r, opts, read);
    return text_tokenizer(r, opts, docs, note);
  }
  if (r.data.name == "tokens") {
    // trainer tokenize writes tokenizer.txt beside train.bin.
    const std::filesystem::path beside = std::filesystem::path(r.data.train_path.path).parent_path() / "tokenizer.txt";
    std::error_code ec;
    if (std::filesystem::is_regular_file(beside, ec)) return Tokenizer::load(beside.string());
  }
  return std::nullopt;
}

}  // namespace laconic
