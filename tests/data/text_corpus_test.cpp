#include "framework/data/text_corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "framework/core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;
using Docs = std::vector<std::string>;

class TextCorpusFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laconic_text_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  // load_text_corpus(path) must throw an InputError: one line naming `path` and saying `what`.
  static void expect_error(const fs::path& path, const std::string& what) {
    try {
      load_text_corpus(path.string());
      ADD_FAILURE() << "no InputError for " << path;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

TEST_F(TextCorpusFiles, FortuneEntriesAreDocuments) {
  // Blank lines inside an entry do not split it; empty entries (%% in a row) vanish; the
  // attribution's tab indentation becomes one space.
  const fs::path f = write("cookie",
                           "\"If it ain't broke,\ndon't fix it.\"\n\t\t-- Bert Lantz\n%\n"
                           "First line.\n\nSecond paragraph.\n%\n%\n   \n%\nLast, without a final separator");
  EXPECT_EQ(load_text_corpus(f.string()),
            (Docs{"\"If it ain't broke, don't fix it.\" -- Bert Lantz", "First line. Second paragraph.",
                  "Last, without a final separator"}));
}

TEST_F(TextCorpusFiles, DosLineEndsStillSeparate) {
  const fs::path f = write("dos", "one\r\n%\r\ntwo\r\n");
  EXPECT_EQ(load_text_corpus(f.string()), (Docs{"one", "two"}));
}

TEST_F(TextCorpusFiles, PlainFilesSplitAtBlankLines) {
  // A '%' inside a line does not make a fortune file; whitespace-only lines count as blank.
  const fs::path f = write("notes.txt", "100% sure\nof it\n\n\nnext  paragraph\n \t \nlast\n");
  EXPECT_EQ(load_text_corpus(f.string()), (Docs{"100% sure of it", "next paragraph", "last"}));
}

TEST_F(TextCorpusFiles, FolderIsReadRecursivelyInSortedOrderSkippingLinksAndBinaries) {
  write("b", "b1\n%\nb2\n");
  write("a/z", "a-z\n");
  write("a/c", "a-c\n\na-c second\n");
  write("b.dat", std::string("\0\0\0\2binary index", 17));
  fs::create_symlink(dir_ / "b", dir_ / "b.u8");  // fortune's alias: must not double the entries
  const TextCorpusOptions fortunes{{""}, {}};          // fortune databases have no extension
  EXPECT_EQ(load_text_corpus(dir_.string(), fortunes), (Docs{"a-c", "a-c second", "a-z", "b1", "b2"}));
}

TEST_F(TextCorpusFiles, FolderReadsDeclaredExtensionsOnlyAndNeverRunOutputs) {
  write("book.txt", "chapter one\n");
  write("notes.md", "markdown\n");
  write("data.csv", "a,b\n");
  write("sub/more.txt", "chapter two\n");
  write(".git/HEAD.txt", "hidden\n");
  // A run directory inside the corpus folder (its log and tokenizer are .txt), and the run's
  // output folder named by the recipe.
  write("runs/r1/recipe.resolved.toml", "[run]\n");
  write("runs/r1/log.txt", "a run's log\n");
  write("out/tokenizer-4000-0123456789abcdef.txt", "#laconic-bpe\n");
  TextCorpusOptions o;
  o.exclude = {(dir_ / "out").string()};
  EXPECT_EQ(load_text_corpus(dir_.string(), o), (Docs{"chapter one", "chapter two"}));
  o.extensions = {".txt", ".md"};
  EXPECT_EQ(load_text_corpus(dir_.string(), o), (Docs{"chapter one", "markdown", "chapter two"}));
  // A file given directly is read whatever its name.
  EXPECT_EQ(load_text_corpus((dir_ / "data.csv").string(), o), (Docs{"a,b"}));
}

TEST(TextNormalize, WhitespaceOverstrikeAndControls) {
  EXPECT_EQ(normalize_whitespace("  a \t\n b\r\n"), "a b");
  // Underline (_ BS x) and bold (x BS x) keep the displayed byte; BEL is dropped.
  EXPECT_EQ(normalize_whitespace("_\bb_\bi_\bg b\bbo\bol\bld\bd\a!"), "big bold!");
  // UTF-8 is kept byte for byte.
  EXPECT_EQ(normalize_whitespace("caf\xc3\xa9   \xe2\x80\x94 ok"), "caf\xc3\xa9 \xe2\x80\x94 ok");
  EXPECT_EQ(normalize_whitespace(" \n\t "), "");
}

TEST_F(TextCorpusFiles, MissingPathNamesItAndTheInstallHint) {
  expect_error(dir_ / "nowhere", "no such file or directory; install Debian's fortunes (apt-get install fortunes)");
}

TEST_F(TextCorpusFiles, EmptyCorpusIsAnError) {
  expect_error(dir_, "no text documents in files with extension .txt");  // empty folder
  write("only.txt", std::string("\0\1", 2));
  expect_error(dir_, "no text documents");  // only binaries
  write("fortunes", "a fortune\n%\n");
  expect_error(dir_, "(data.extensions; \"\" = none, as fortune databases");  // not a .txt
  expect_error(write("blank", " \n\n%\n\t\n"), "no text documents");
}

TEST_F(TextCorpusFiles, BinaryFileGivenDirectlyIsAnError) {
  expect_error(write("x.dat", std::string("ab\0cd", 5)), "not a text file");
}

}  // namespace
}  // namespace laconic
