// Reading the user's files with bounded memory (core/input.h), bounded JSON
// (core/json.h) and the parameter store's refusal of a model the machine cannot hold.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/check.h"
#include "core/input.h"
#include "core/json.h"
#include "core/params.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laconic_input_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  fs::path dir_;
};

// The message of the InputError f throws; "" (and a failure) when it throws none.
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
    return m;
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST_F(InputFiles, ReadsARegularFileWithinItsLimit) {
  write("a.txt", std::string("abc\0def", 7));
  EXPECT_EQ(read_input_file(path("a.txt"), 7, "text file"), std::string("abc\0def", 7));
  const InputFile f(path("a.txt"), 100, "text file");
  EXPECT_EQ(f.size(), 7u);
  char two[2];
  f.read_at(4, two, 2);
  EXPECT_EQ(std::string(two, 2), "de");
  // Reading past the end is the file having changed under us, an InputError too.
  char more[4];
  EXPECT_NE(input_error([&] { f.read_at(5, more, 4); }).find("changed while being read"), std::string::npos);
}

TEST_F(InputFiles, RefusesAFileOverItsLimitNamingIt) {
  write("big.toml", std::string(1001, 'x'));
  const std::string e = input_error([&] { read_input_file(path("big.toml"), 1000, "recipe"); });
  EXPECT_EQ(e, path("big.toml") + ": 1001 bytes, more than the limit of 1000 (1.00 KB) for a recipe");
  EXPECT_EQ(input_error([&] { read_input_file(path("none"), 10, "recipe"); }),
            path("none") + ": cannot open recipe: No such file or directory");
}

TEST_F(InputFiles, RefusesWhatIsNotARegularFileWithoutBlocking) {
  EXPECT_EQ(input_error([&] { read_input_file(dir_.string(), 1000, "recipe"); }),
            dir_.string() + ": a directory, expected a regular file (recipe)");
  EXPECT_EQ(input_error([&] { read_input_file("/dev/zero", 1u << 30, "recipe"); }),
            "/dev/zero: a character device, expected a regular file (recipe)");
  // A FIFO without a writer: a plain open would wait for one forever.
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(input_error([&] { read_input_file(path("fifo"), 1000, "safetensors file"); }),
            path("fifo") + ": a FIFO, expected a regular file (safetensors file)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ParseJson, BoundsTheNesting) {
  // kMaxJsonDepth containers parse; one more is refused, and so are a million (which nlohmann
  // parses, but whose dump() would overflow the stack).
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_TRUE(parse_json(nested(kMaxJsonDepth), "x.json").is_array());
  EXPECT_EQ(input_error([&] { parse_json(nested(kMaxJsonDepth + 1), "x.json"); }),
            "x.json: JSON nested deeper than 64 levels");
  const std::string deep = "{\"dtype\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  EXPECT_EQ(input_error([&] { parse_json(deep, "w.safetensors"); }), "w.safetensors: JSON nested deeper than 64 levels");
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  EXPECT_NE(input_error([&] { parse_json(objects, "o.json"); }).find("nested deeper"), std::string::npos);
}

TEST(ParseJson, SyntaxErrorsNameThePlaceNotTheText) {
  const std::string e = input_error([&] { parse_json("{\"a\": \"" + std::string(100000, 'q') + "\n", "s.json"); });
  EXPECT_EQ(e.rfind("s.json: not valid JSON: parse error at line 2, column 0: syntax error while parsing value", 0), 0u) << e;
  EXPECT_EQ(e.find("qqqq"), std::string::npos) << e;  // the string read is not echoed
  EXPECT_LT(e.size(), 300u) << e;
  EXPECT_EQ(parse_json("{\"a\": [1, 2]}", "ok.json")["a"][1], 2);
}

TEST(ParamStore, RefusesAModelTheMachineCannotHold) {
  // 2^40 parameters need 8 TB for weights and gradients; no allocation is attempted.
  ParamStore huge;
  huge.add("w", {1 << 20, 1 << 20}, ParamGroup::decay);
  const std::string e = input_error([&] { huge.finalize(); });
  EXPECT_EQ(e.rfind("the model's 1099511627776 parameters need 8.80 TB for weights and gradients, more than this "
                    "machine's memory (", 0), 0u) << e;
  EXPECT_FALSE(huge.finalized());
  // An element count past 2^64 is refused, not wrapped to a small one.
  ParamStore wrapped;
  EXPECT_NE(input_error([&] { wrapped.add("w", {1ll << 32, 1ll << 32}, ParamGroup::decay); }).find("more than 2^64"),
            std::string::npos);
  ParamStore sum;
  sum.add("a", {1ll << 62, 3}, ParamGroup::decay);
  EXPECT_NE(input_error([&] { sum.add("b", {1ll << 62, 2}, ParamGroup::decay); }).find("more than 2^64 parameters"),
            std::string::npos);
  EXPECT_GT(physical_memory_bytes(), 1u << 20);
}

}  // namespace
}  // namespace laconic
