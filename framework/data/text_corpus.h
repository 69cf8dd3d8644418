// Plain-text corpora for masked-language-model training, read as a list of documents.
//
// The default corpus is Debian's `fortunes` package (/usr/share/games/fortunes, ~2.5 MB of
// English text in ~15000 entries). Its databases are text files whose entries are separated by
// lines holding only "%"; beside each sits a binary index `NAME.dat` (strfile output) and a
// symlink `NAME.u8` to the same text. Loading takes the text files and skips the rest, so each
// entry is read exactly once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace laconic {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct TextCorpusOptions {
  // Inside a folder, the files read: those whose name ends with one of these ("" = files without
  // an extension, which is how fortune databases are named). Files given directly are always read.
  std::vector<std::string> extensions = {".txt"};
  // Folders never entered (a run's output folder, the tokenizer cache), besides the ones always
  // skipped: hidden ones (".git") and run directories (holding recipe.resolved.toml).
  std::vector<std::string> exclude;
};

// Documents of `path`, a text file or a folder searched recursively (files in sorted path order,
// so the corpus and everything derived from it are the same on every machine). Inside a folder,
// only files with one of options.extensions are read, and symlinks (fortune's NAME.u8 aliases),
// binary files (holding a NUL byte), hidden entries, run directories and options.exclude are
// skipped. A file that has a line consisting of "%" is a fortune database: each %-separated
// entry is one document; any other file is split into paragraphs at blank lines. Each document
// is normalised by normalize_whitespace and empty ones are dropped.
// Throws InputError (one line naming the path): no such path (with the install hint), a path
// given directly that is not text, an unreadable file, or no document at all.
std::vector<std::string> load_text_corpus(const std::string& path, const TextCorpusOptions& options = {});

// Collapses every run of whitespace to one space and trims both ends. Terminal overstrikes
// (X BACKSPACE Y, how old fortunes spell bold and underline) keep only Y, as `col -b` would; other
// control bytes (BEL, ESC, DEL) are dropped. Bytes >= 0x80 are kept as they are (UTF-8 stays
// UTF-8; nothing is decoded).
std::string normalize_whitespace(std::string_view text);

}  // namespace laconic
