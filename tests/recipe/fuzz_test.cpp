// Fuzz-style robustness of the recipe parser: deterministic mutations of every recipes/*.toml
// (and of overrides) must each end as a Recipe or as a laconic::InputError with a one-line message
// that starts with the file name (or "--" for an override). A crash, another exception, a
// multi-line message or a hang fails the test and prints the mutated text. Accepted recipes must
// also print (to_toml) and read back to an equal Recipe.
#include "framework/recipe/recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kMutationsPerRecipe = 320;  // x 13 recipes: about 4000 texts
constexpr int kOverrideMutationsPerRecipe = 40;
constexpr auto kHangLimit = std::chrono::seconds(20);  // one parse taking this long is a hang

// splitmix64: the same sequence on every platform (std:: distributions are not portable).
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  template <typename T, std::size_t N>
  const T& pick(const std::array<T, N>& items) { return items[below(N)]; }
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Lines of the form "key = value" (not headers, not comments): their indices.
std::vector<std::size_t> assignment_lines(const std::vector<std::string>& lines) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto first = lines[i].find_first_not_of(" \t");
    if (first == std::string::npos || lines[i][first] == '#' || lines[i][first] == '[') continue;
    if (lines[i].find('=') != std::string::npos) out.push_back(i);
  }
  return out;
}

constexpr std::array<const char*, 16> kValuesOfOtherTypes{
    "\"a string\"", "\"\"", "42", "-7", "4.25", "true", "false", "[1, 2]", "[]", "[\"x\", 1]",
    "{ a = 1 }", "{}", "1979-05-27", "07:32:00", "[[1], [2]]", "\"100 Gbit/s\""};
constexpr std::array<const char*, 14> kSpecialNumbers{
    "0", "-1", "1e308", "-1e308", "nan", "inf", "-inf", "-0.0", "1e-320", "0.0",
    "9223372036854775807", "-9223372036854775808", "1", "3000000000"};
constexpr std::array<const char*, 14> kGarbage{
    "[", "]", "=", "\"", "'", "{", "}", "\\", "#", "[[x]]", "\n[train]\n", "\x00", "\xff\xfe", "= = ="};

enum class Mutation {
  delete_line, duplicate_line, swap_lines, truncate, other_type, flip_char, insert_garbage,
  rename_key, special_number, count
};
constexpr std::array<const char*, 9> kMutationNames{
    "delete a line", "duplicate a line", "swap two lines", "truncate", "value of another type",
    "flip a character", "insert garbage", "rename a key", "special number"};

std::string mutate(const std::string& text, Mutation m, Rng& rng) {
  auto lines = split_lines(text);
  const auto assigns = assignment_lines(lines);
  switch (m) {
    case Mutation::delete_line:
      if (!lines.empty()) lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(rng.below(lines.size())));
      return join_lines(lines);
    case Mutation::duplicate_line:
      if (!lines.empty()) {
        const auto i = rng.below(lines.size());
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(rng.below(lines.size() + 1)), lines[i]);
      }
      return join_lines(lines);
    case Mutation::swap_lines:
      if (lines.size() >= 2) std::swap(lines[rng.below(lines.size())], lines[rng.below(lines.size())]);
      return join_lines(lines);
    case Mutation::truncate:
      return text.substr(0, rng.below(text.size() + 1));
    case Mutation::other_type: {
      if (assigns.empty()) return text;
      std::string& line = lines[assigns[rng.below(assigns.size())]];
      line = line.substr(0, line.find('=') + 1) + " " + rng.pick(kValuesOfOtherTypes);
      return join_lines(lines);
    }
    case Mutation::flip_char: {
      if (text.empty()) return text;
      std::string out = text;
      const auto i = rng.below(out.size());
      if (rng.below(2) == 0)
        out[i] = static_cast<char>(out[i] ^ (1 << rng.below(8)));      // any byte, even invalid UTF-8
      else
        out[i] = static_cast<char>(' ' + rng.below(95));                // printable ASCII
      return out;
    }
    case Mutation::insert_garbage: {
      std::string out = text;
      std::string junk = rng.pick(kGarbage);
      if (junk.empty()) junk.assign(1, '\0');  // "\x00" as a C string is empty: the NUL byte itself
      if (rng.below(3) == 0) {
        junk.clear();
        for (std::size_t n = 1 + rng.below(8); n > 0; --n) junk += static_cast<char>(rng.below(256));
      }
      out.insert(rng.below(out.size() + 1), junk);
      return out;
    }
    case Mutation::rename_key: {
      if (assigns.empty()) return text;
      std::string& line = lines[assigns[rng.below(assigns.size())]];
      const auto start = line.find_first_not_of(" \t");
      const auto end = line.find_first_of(" \t=", start);
      const auto len = end - start;
      const char letter = "abcdefghijklmnopqrstuvwxyz_"[rng.below(27)];
      const auto at = start + rng.below(len);
      switch (rng.below(3)) {
        case 0: line[at] = letter; break;                                 // substitute
        case 1: line.insert(at, 1, letter); break;                        // insert
        default: if (len > 1) line.erase(at, 1); else line[at] = letter;  // delete
      }
      return join_lines(lines);
    }
    case Mutation::special_number: {
      // A numeric token anywhere (a value, an array element, an inline table's steps).
      std::vector<std::pair<std::size_t, std::size_t>> tokens;  // [begin, end)
      for (std::size_t i = 0; i < text.size();) {
        const bool starts = std::isdigit(static_cast<unsigned char>(text[i])) &&
                            (i == 0 || std::string_view(" =[,-").find(text[i - 1]) != std::string_view::npos);
        if (!starts) { ++i; continue; }
        std::size_t b = i > 0 && text[i - 1] == '-' ? i - 1 : i, e = i;
        while (e < text.size() && std::string_view("0123456789.eE+-_").find(text[e]) != std::string_view::npos) ++e;
        tokens.emplace_back(b, e);
        i = e;
      }
      if (tokens.empty()) return text;
      const auto [b, e] = tokens[rng.below(tokens.size())];
      return text.substr(0, b) + rng.pick(kSpecialNumbers) + text.substr(e);
    }
    case Mutation::count: break;
  }
  return text;
}

// Fails the whole binary (with the text) when one parse runs longer than kHangLimit: a hang cannot
// be caught from the thread that hangs.
class Watchdog {
 public:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void begin(const std::string& what) {
    std::lock_guard lock(mu_);
    what_ = what;
    started_ = Clock::now();
    busy_ = true;
  }
  void end() {
    std::lock_guard lock(mu_);
    busy_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (busy_ && Clock::now() - started_ > kHangLimit) {
        std::fprintf(stderr, "HANG: one parse ran over %lld s on:\n%s\n",
                     static_cast<long long>(kHangLimit.count()), what_.c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::string what_;
  Clock::time_point started_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

struct Tally {
  int accepted = 0;
  int rejected = 0;
  std::array<int, kMutationNames.size()> per_kind{};
};

// Parses `text` under `name` (with overrides) and checks the outcome. "" when fine, else what went wrong.
std::string check_one(const std::string& text, const std::string& name, const std::vector<std::string>& overrides,
                      Tally& tally) {
  try {
    const Recipe r = parse_recipe(text, name, overrides);
    ++tally.accepted;
    // What is accepted prints and reads back as the same recipe: field for field, but for the
    // sections of components the recipe does not use (set in the text, never printed: a mutation
    // that deletes `strategy = ...` leaves one), where the printed form must read back to itself.
    const std::string printed = to_toml(r);
    Recipe back = parse_recipe(printed, name);
    if (!(back == r) && to_toml(back) != printed)
      return "accepted, but to_toml() does not read back as the same recipe:\n" + printed;
    if (!(back == r) && !(back.sync == r.sync && back.network == r.network && back.optimizer == r.optimizer &&
                          back.train == r.train && back.model == r.model && back.data == r.data))
      return "accepted, but to_toml() reads back as another recipe in a built-in section:\n" + printed;
    return "";
  } catch (const InputError& e) {
    ++tally.rejected;
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos) return "InputError message is not one line: " + msg;
    if (!msg.starts_with(name + ":") && !msg.starts_with("--"))
      return "InputError message does not start with the file name or --: " + msg;
    if (msg.starts_with(name + ":") && msg.size() <= name.size() + 2) return "InputError message is empty: " + msg;
    return "";
  } catch (const std::exception& e) {
    return std::string("threw an exception that is not an InputError: ") + e.what();
  } catch (...) {
    return "threw something that is not a std::exception";
  }
}

std::vector<fs::path> recipe_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(LACONIC_SOURCE_DIR) / "recipes"))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Printable form of a mutated text for failure messages (NUL and other control bytes escaped).
std::string visible(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\t' || (u >= 0x20 && u != 0x7f)) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

TEST(RecipeFuzz, MutatedRecipesParseOrFailCleanly) {
  const auto files = recipe_files();
  ASSERT_GE(files.size(), 1u);
  Watchdog watchdog;
  Tally tally;
  int failures = 0;
  const auto started = Clock::now();
  auto run = [&](const std::string& text, const std::string& name, const std::vector<std::string>& overrides,
                 const std::string& how) {
    watchdog.begin(how + "\n" + visible(text));
    const std::string problem = check_one(text, name, overrides, tally);
    watchdog.end();
    if (!problem.empty() && ++failures <= 20) {
      std::string ov;
      for (const auto& o : overrides) ov += " --" + o;
      ADD_FAILURE() << how << ": " << problem << "\noverrides:" << ov << "\n--- mutated text ---\n"
                    << visible(text) << "--- end ---";
    }
  };

  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string name = files[f].string();
    const std::string original = read_all(files[f]);
    // The unmutated recipe and the degenerate files.
    run(original, name, {}, "original " + name);
    run("", name, {}, "empty file");
    run("\n\n   \n", name, {}, "whitespace only");
    run("# only a comment\n", name, {}, "comment only");
    run(std::string(1, '\0'), name, {}, "a NUL byte");

    Rng rng{0x1ac0de0000ull + f};
    for (int i = 0; i < kMutationsPerRecipe; ++i) {
      // Mostly one mutation; sometimes two or three stacked.
      std::string text = original;
      std::string how = name + " case " + std::to_string(i) + ":";
      const std::size_t rounds = rng.below(4) == 0 ? 2 + rng.below(2) : 1;
      for (std::size_t k = 0; k < rounds; ++k) {
        const auto kind = static_cast<std::size_t>(rng.below(static_cast<std::size_t>(Mutation::count)));
        text = mutate(text, static_cast<Mutation>(kind), rng);
        ++tally.per_kind[kind];
        how += std::string(" ") + kMutationNames[kind] + ";";
      }
      run(text, name, {}, how);
    }

    // Overrides: every key of the resolved recipe, with its value replaced or its key misspelt.
    const auto lines = split_lines(to_toml(parse_recipe(original, name)));
    std::vector<std::string> keys;
    std::string section;
    for (const auto& line : lines) {
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        section = line.substr(1, line.size() - 2);
        continue;
      }
      keys.push_back(section + "." + line.substr(0, line.find(" = ")));
    }
    for (int i = 0; i < kOverrideMutationsPerRecipe; ++i) {
      std::string key = keys[rng.below(keys.size())];
      std::string value;
      switch (rng.below(4)) {
        case 0: value = rng.pick(kValuesOfOtherTypes); break;
        case 1: value = rng.pick(kSpecialNumbers); break;
        case 2: value = rng.pick(kGarbage); break;
        default:
          key[rng.below(key.size())] = "abcdefghijklmnopqrstuvwxyz_."[rng.below(28)];
          value = "1";
      }
      const std::string override = rng.below(8) == 0 ? key + value : key + "=" + value;  // sometimes no '='
      run(original, name, {override}, name + " override --" + override);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const int total = tally.accepted + tally.rejected;
  std::printf("[fuzz] %d texts in %.2f s: %d parsed, %d rejected cleanly; mutations:", total, seconds,
              tally.accepted, tally.rejected);
  for (std::size_t k = 0; k < kMutationNames.size(); ++k) std::printf(" %s %d,", kMutationNames[k], tally.per_kind[k]);
  std::printf("\n");
  EXPECT_EQ(failures, 0) << failures << " mutated texts failed (the first 20 are shown)";
  EXPECT_GE(total, 2000);
  EXPECT_GT(tally.accepted, 0) << "no mutation parsed: the mutations are too destructive to test much";
  EXPECT_GT(tally.rejected, total / 4) << "few mutations were rejected: the mutations are too gentle";
}

// The same deterministic mutations of the bad corpus (already-broken input must not become a
// crash when broken further).
TEST(RecipeFuzz, MutatedBadRecipesFailCleanly) {
  const fs::path dir = fs::path(LACONIC_SOURCE_DIR) / "tests" / "recipe" / "bad";
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  Watchdog watchdog;
  Tally tally;
  int failures = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string name = files[f].string();
    const std::string original = read_all(files[f]);
    Rng rng{0xbadull * 1000 + f};
    for (int i = 0; i < 12; ++i) {
      const auto kind = rng.below(static_cast<std::size_t>(Mutation::count));
      const std::string text = mutate(original, static_cast<Mutation>(kind), rng);
      watchdog.begin(visible(text));
      const std::string problem = check_one(text, name, {}, tally);
      watchdog.end();
      if (!problem.empty() && ++failures <= 20)
        ADD_FAILURE() << name << " case " << i << " (" << kMutationNames[kind] << "): " << problem
                      << "\n--- mutated text ---\n" << visible(text) << "--- end ---";
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace laconic
