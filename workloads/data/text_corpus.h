// Plain-text corpora for masked-language-model training, read as a list of documents.
//
// The default corpus is Debian's `fortunes` package (/usr/share/games/fortunes, ~2.5 MB of
// English text in ~15000 entries). Its databases are text files whose entries are separated by
// lines holding only "%"; beside each sits a binary index `NAME.dat` (strfile output) and a
// symlink `NAME.u8` to the same text. Loading takes the text files and skips the rest, so each
// entry is read exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace laconic {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct TextCorpusOptions {
  // Inside a folder, the files read: those whose extension (file_extension) is one of these, ""
  // standing for files without one, which is how fortune databases and /usr/share/common-licenses
  // ("Apache-2.0") are named; or whose name ends with one of them (".0" reads "Apache-2.0"). Files
  // given directly are always read.
  std::vector<std::string> extensions = {".txt"};
  // Folders never entered (a run's output folder, the tokenizer cache), besides the ones always
  // skipped: hidden ones (".git") and run directories (holding recipe.resolved.toml).
  std::vector<std::string> exclude = {};
  // What error messages call `extensions`: the recipe key, or the flag that set them.
  std::string extensions_key = "data.extensions";
};

// What load_text_corpus read and skipped, for the line a loader prints.
struct TextCorpusReport {
  std::int64_t files = 0, bytes = 0;  // files read and their size
  std::int64_t other_extension = 0;   // files skipped for their extension
  std::int64_t binary = 0;            // files skipped for holding a NUL byte
  std::int64_t links = 0;             // symlinks and special files (FIFOs, devices)
  std::int64_t hidden = 0;            // files whose name starts with "."
  std::vector<std::string> skipped_extensions;  // the extensions of the first, sorted ("none": no extension)

  // "read 410 files (2.1 MB) under DIR; skipped 12: 10 not matching extensions (.gz, .dat), 2 binary"
  std::string describe(const std::string& path) const;
};

// The extension of a file name: its suffix from the last dot when that suffix looks like one, 1
// to 8 ASCII letters and digits with at least one letter (".txt", ".md", ".gz", ".mp3"); otherwise
// "" (no extension), so "Apache-2.0", "LGPL-2.1" and "v1.2" have none.
std::string file_extension(const std::string& filename);

// Documents of `path`, a text file or a folder searched recursively (files in sorted path order,
// so the corpus and everything derived from it are the same on every machine). Inside a folder,
// only files with one of options.extensions are read (see above), and symlinks (fortune's NAME.u8 aliases),
// binary files (holding a NUL byte), hidden entries, run directories and options.exclude are
// skipped. A file that has a line consisting of "%" is a fortune database: each %-separated
// entry is one document; any other file is split into paragraphs at blank lines. Each document
// is normalised by normalize_whitespace and empty ones are dropped.
// `report`, when given, receives what was read and skipped.
// Throws InputError (one line naming the path): no such path (with the install hint), a path
// given directly that is not text, an unreadable file, or no document at all.
std::vector<std::string> load_text_corpus(const std::string& path, const TextCorpusOptions& options = {},
                                          TextCorpusReport* report = nullptr);

// Collapses every run of whitespace to one space and trims both ends. Terminal overstrikes
// (X BACKSPACE Y, how old fortunes spell bold and underline) keep only Y, as `col -b` would; other
// control bytes (BEL, ESC, DEL) are dropped. Bytes >= 0x80 are kept as they are (UTF-8 stays
// UTF-8; nothing is decoded).
std::string normalize_whitespace(std::string_view text);

}  // namespace laconic
