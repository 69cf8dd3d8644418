#include "workloads/data/text_corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/units.h"

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
  const TextCorpusOptions fortunes{.extensions = {""}};  // fortune databases have no extension
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

// /usr/share/common-licenses names its texts "Apache-2.0", "LGPL-2.1", "GPL-3": a version after
// the dot is not an extension, so with "" (no extension) they are read, and the loader says what
// it read and skipped, and why.
TEST_F(TextCorpusFiles, DottedNamesWithoutAnExtensionAreReadAndSkipsAreCounted) {
  EXPECT_EQ(file_extension("Apache-2.0"), "");
  EXPECT_EQ(file_extension("LGPL-2.1"), "");
  EXPECT_EQ(file_extension("GPL-3"), "");
  EXPECT_EQ(file_extension("notes.txt"), ".txt");
  EXPECT_EQ(file_extension("song.mp3"), ".mp3");
  EXPECT_EQ(file_extension("archive.tar.gz"), ".gz");
  EXPECT_EQ(file_extension("v1.2"), "");

  write("Apache-2.0", "apache\n");
  write("LGPL-2.1", "lgpl\n");
  write("GPL-3", "gpl\n");
  write("notes.md", "markdown\n");
  write("old.gz", "not text really\n");
  write("index.dat", std::string("\0\0\1", 3));
  write(".hidden", "hidden\n");
  fs::create_symlink(dir_ / "GPL-3", dir_ / "GPL");
  TextCorpusReport report;
  EXPECT_EQ(load_text_corpus(dir_.string(), {.extensions = {""}}, &report), (Docs{"apache", "gpl", "lgpl"}));
  EXPECT_EQ(report.files, 3);
  EXPECT_EQ(report.bytes, 7 + 5 + 4);
  EXPECT_EQ(report.other_extension, 3);  // notes.md, old.gz, index.dat
  EXPECT_EQ(report.skipped_extensions, (Docs{".dat", ".gz", ".md"}));
  EXPECT_EQ(report.links, 1);
  EXPECT_EQ(report.hidden, 1);
  EXPECT_EQ(report.binary, 0);
  EXPECT_EQ(report.describe("D"), "read 3 files (" + format_bytes(16) +
                                      ") under D; skipped 5: 3 not matching extensions (.dat, .gz, .md), "
                                      "1 symlinks or special files, 1 hidden");

  // A binary file with a matching extension is read, found binary and counted as such; a listed
  // suffix matches the end of a name ("Apache-2.0" with ".0").
  EXPECT_EQ(load_text_corpus(dir_.string(), {.extensions = {".dat", ".0"}}, &report), (Docs{"apache"}));
  EXPECT_EQ(report.files, 1);
  EXPECT_EQ(report.binary, 1);
  EXPECT_EQ(report.skipped_extensions, (Docs{".gz", ".md", "none"}));
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
  expect_error(dir_, "(data.extensions; \"\" = none, as fortune databases; read 0 files (" + format_bytes(0) + ") under " +
                         dir_.string() + "; skipped 2: 1 not matching extensions (none), 1 binary)");  // not a .txt
  expect_error(write("blank", " \n\n%\n\t\n"), "no text documents");
}

TEST_F(TextCorpusFiles, BinaryFileGivenDirectlyIsAnError) {
  expect_error(write("x.dat", std::string("ab\0cd", 5)), "not a text file");
}

}  // namespace
}  // namespace laconic
