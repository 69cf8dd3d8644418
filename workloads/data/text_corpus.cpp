#include "workloads/data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/check.h"
#include "core/input.h"
#include "core/units.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInstallHint = "install Debian's fortunes (apt-get install fortunes) or set [data] path";

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A text file is held whole: one larger than the machine's memory cannot be.
std::string read_file(const fs::path& path) { return read_input_file(path, physical_memory_bytes(), "text file"); }

// A NUL never occurs in text (in any encoding we read byte-wise); strfile's .dat indexes start
// with a big-endian version word and so hold several.
bool is_binary(const std::string& bytes) { return bytes.find('\0') != std::string::npos; }

// The line without its end-of-line (\n, and a \r before it for files written on DOS).
std::string_view strip_eol(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return is_space(static_cast<unsigned char>(c)); });
}

// Calls f(line) for each line of text (without its '\n').
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    f(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// Appends the documents of one file: fortune entries or blank-line paragraphs.
void split_documents(std::string_view text, std::vector<std::string>& out) {
  bool fortune = false;
  for_each_line(text, [&](std::string_view line) { fortune = fortune || strip_eol(line) == "%"; });

  std::string current;
  auto flush = [&] {
    std::string doc = normalize_whitespace(current);
    if (!doc.empty()) out.push_back(std::move(doc));
    current.clear();
  };
  for_each_line(text, [&](std::string_view line) {
    const bool separator = fortune ? strip_eol(line) == "%" : is_blank(line);
    if (separator) {
      flush();
    } else {
      current.append(line);
      current.push_back('\n');
    }
  });
  flush();
}

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  const std::string ext = file_extension(name);
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const std::string& e) { return e == ext || (!e.empty() && name.ends_with(e)); });
}

// Regular, non-symlink files under dir with one of the extensions, in sorted path order; hidden
// entries, run directories and the excluded folders are not entered. Files passed over are
// counted in `report`.
std::vector<fs::path> text_files_under(const fs::path& dir, const TextCorpusOptions& options, TextCorpusReport& report) {
  std::vector<fs::path> excluded;
  std::error_code ec;
  for (const std::string& e : options.exclude) {
    const fs::path p = fs::weakly_canonical(e, ec);
    if (!ec) excluded.push_back(p);
  }
  std::vector<fs::path> files;
  // Directory symlinks are not followed (the iterator's default), so a link cannot loop.
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const bool hidden = p.filename().string().starts_with('.');
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      const fs::path canonical = fs::weakly_canonical(p, ec);
      const bool skip = hidden || fs::exists(p / "recipe.resolved.toml", ec) ||
                        std::find(excluded.begin(), excluded.end(), canonical) != excluded.end();
      if (skip) it.disable_recursion_pending();
      continue;
    }
    const std::string name = p.filename().string();
    if (hidden) {
      ++report.hidden;
    } else if (it->is_symlink(ec) || !it->is_regular_file(ec)) {
      ++report.links;
    } else if (!has_extension(name, options.extensions)) {
      ++report.other_extension;
      const std::string ext = file_extension(name);
      report.skipped_extensions.push_back(ext.empty() ? "none" : ext);
    } else {
      files.push_back(p);
    }
  }
  auto& seen = report.skipped_extensions;
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  if (ec) LC_INPUT_ERROR(dir.string(), ": cannot list folder: ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::string extension_list(const std::vector<std::string>& extensions) {
  std::string out;
  for (const std::string& e : extensions) out += (out.empty() ? "" : ", ") + (e.empty() ? std::string("none") : e);
  return out;
}

}  // namespace

std::string file_extension(const std::string& filename) {
  const std::size_t dot = filename.rfind('.');
  if (dot == std::string::npos || dot == 0) return "";
  const std::string_view suffix = std::string_view(filename).substr(dot + 1);
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const bool looks_like_one = !suffix.empty() && suffix.size() <= 8 && std::all_of(suffix.begin(), suffix.end(), alnum) &&
                              std::any_of(suffix.begin(), suffix.end(), letter);
  return looks_like_one ? filename.substr(dot) : "";
}

std::string TextCorpusReport::describe(const std::string& path) const {
  std::string out = detail::concat("read ", files, files == 1 ? " file (" : " files (", format_bytes(static_cast<double>(bytes)),
                                   ") under ", path);
  const std::int64_t skipped = other_extension + binary + links + hidden;
  if (skipped == 0) return out;
  out += detail::concat("; skipped ", skipped, ":");
  const char* sep = " ";
  const auto part = [&](std::int64_t n, const std::string& what) {
    if (n == 0) return;
    out += detail::concat(sep, n, " ", what);
    sep = ", ";
  };
  std::string exts;
  for (std::size_t i = 0; i < skipped_extensions.size() && i < 4; ++i) exts += (i ? ", " : "") + skipped_extensions[i];
  if (skipped_extensions.size() > 4) exts += ", ...";
  part(other_extension, "not matching extensions (" + exts + ")");
  part(binary, "binary");
  part(links, "symlinks or special files");
  part(hidden, "hidden");
  return out;
}

std::string normalize_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;  // a whitespace run awaits the next kept byte (so trailing runs vanish)
  bool last_is_byte = false;   // out.back() is a kept byte a backspace may overstrike
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_space(c)) {
      pending_space = !out.empty();
      last_is_byte = false;
    } else if (c == '\b') {
      if (last_is_byte) out.pop_back();  // the byte after the backspace is the one displayed
      last_is_byte = false;
    } else if (c < 0x20 || c == 0x7f) {
      // Other control bytes (BEL, ESC...) carry no text.
    } else {
      if (pending_space) out.push_back(' ');
      pending_space = false;
      out.push_back(ch);
      last_is_byte = true;
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();  // left when a backspace erased the last byte
  return out;
}

std::vector<std::string> load_text_corpus(const std::string& path, const TextCorpusOptions& options,
                                          TextCorpusReport* report) {
  TextCorpusReport local;
  TextCorpusReport& r = report ? *report : local;
  r = {};
  const fs::path root(path);
  std::error_code ec;
  const fs::file_status status = fs::status(root, ec);
  if (!fs::exists(status)) LC_INPUT_ERROR(path, ": no such file or directory; ", kInstallHint);

  std::vector<std::string> docs;
  if (fs::is_directory(status)) {
    for (const fs::path& file : text_files_under(root, options, r)) {
      const std::string bytes = read_file(file);
      if (is_binary(bytes)) {
        ++r.binary;
        continue;
      }
      ++r.files;
      r.bytes += static_cast<std::int64_t>(bytes.size());
      split_documents(bytes, docs);
    }
    if (docs.empty())
      LC_INPUT_ERROR(path, ": no text documents in files with extension ", extension_list(options.extensions),
                     " in this folder (", options.extensions_key, "; \"\" = none, as fortune databases; ",
                     r.describe(path), ")");
  } else {
    const std::string bytes = read_file(root);
    if (is_binary(bytes)) LC_INPUT_ERROR(path, ": not a text file (it holds NUL bytes)");
    r.files = 1;
    r.bytes = static_cast<std::int64_t>(bytes.size());
    split_documents(bytes, docs);
    if (docs.empty()) LC_INPUT_ERROR(path, ": no text documents (the file is empty or only whitespace)");
  }
  return docs;
}

}  // namespace laconic
