// The bad-recipe corpus: every tests/recipe/bad/*.toml must be rejected with exactly the message
// its first line announces. The first line of each file is
//   # expect: <the message after "FILE:">
// e.g. "# expect: 5:1: optimizer.lr: expected a number > 0, got -0.1", so load_recipe(path) must
// throw InputError(path + ":" + "5:1: optimizer.lr: ..."). (A message that names no line, such as
// the "train.steps, train.epochs" check of a file without [train], reads "FILE: train.steps, ...":
// its expectation starts with a space.)
#include "framework/recipe/recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kExpectPrefix = "# expect: ";
constexpr std::size_t kMinimumCorpus = 40;

fs::path corpus_dir() { return fs::path(LACONIC_SOURCE_DIR) / "tests" / "recipe" / "bad"; }

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(corpus_dir(), ec))
    if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What load_recipe(path) throws: "InputError: MSG", "OTHER EXCEPTION: MSG" or "no error".
struct Outcome {
  bool input_error = false;
  std::string message;
};

Outcome outcome_of(const std::string& path) {
  try {
    load_recipe(path);
  } catch (const InputError& e) {
    return {true, e.what()};
  } catch (const std::exception& e) {
    return {false, std::string("not an InputError: ") + e.what()};
  } catch (...) {
    return {false, "not a std::exception"};
  }
  return {false, "no error: the recipe loaded"};
}

TEST(RecipeCorpus, HasAtLeastFortyBadRecipes) {
  const auto files = corpus_files();
  EXPECT_GE(files.size(), kMinimumCorpus) << "in " << corpus_dir();
}

TEST(RecipeCorpus, EveryBadRecipeGivesItsExpectedMessage) {
  const auto files = corpus_files();
  ASSERT_FALSE(files.empty()) << "no *.toml in " << corpus_dir();
  std::set<std::string> messages;
  for (const auto& file : files) {
    const std::string path = file.string();
    SCOPED_TRACE(path);
    const std::string text = read_all(file);
    const auto eol = text.find('\n');
    const std::string first = text.substr(0, eol);
    ASSERT_TRUE(first.starts_with(kExpectPrefix)) << "first line must be '# expect: MESSAGE', got: " << first;
    const std::string expected = path + ":" + first.substr(kExpectPrefix.size());

    const Outcome got = outcome_of(path);
    EXPECT_TRUE(got.input_error) << got.message;
    EXPECT_EQ(got.message, expected);
    EXPECT_EQ(got.message.find('\n'), std::string::npos) << "the message must be one line";
    EXPECT_TRUE(messages.insert(got.message.substr(path.size())).second)
        << "two corpus files test the same message: " << got.message;

    // The text parsed under the same name gives the same message (load_recipe only adds reading).
    try {
      parse_recipe(text, path);
      ADD_FAILURE() << "parse_recipe accepted it";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
}

}  // namespace
}  // namespace laconic
