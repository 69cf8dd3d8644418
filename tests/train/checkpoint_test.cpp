// Checkpoint files (framework/train/checkpoint.h): shards round-trip bit-exactly, every kind of
// damage is an InputError of one line naming the file, the commit protocol publishes and prunes,
// find_latest_checkpoint only ever returns complete checkpoints, and a process SIGKILLed at any
// point of writing the next checkpoint leaves the previous one intact and found.
#include "framework/train/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "tests/support/input_error.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;
namespace fs = std::filesystem;

using testing::input_error;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Values whose bits a lossy path would change: NaN payloads, -0, denormals, infinities.
std::vector<float> tricky_floats(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits = seed * 2654435761u + static_cast<std::uint32_t>(i) * 40503u;
    std::memcpy(&v[i], &bits, 4);
  }
  if (n >= 6) {
    v[0] = -0.0f;
    v[1] = std::numeric_limits<float>::denorm_min();
    v[2] = std::numeric_limits<float>::infinity();
    const std::uint32_t nan_payload = 0x7fc12345u;
    std::memcpy(&v[3], &nan_payload, 4);
    v[4] = std::numeric_limits<float>::max();
    v[5] = 1.0f / 3.0f;
  }
  return v;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("laconic_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    fs::remove_all(root_);
  }

  std::string root() const { return (root_ / "ckpt").string(); }

  // The shard every test checkpoint holds for (step, rank): distinct bits per step and rank.
  static std::vector<float> params(std::int64_t step, int rank, std::size_t n = 1000) {
    return tricky_floats(n, static_cast<std::uint32_t>(step * 131 + rank));
  }

  // Test hooks of the file layer: the crash tests block in them and kill the process.
  std::function<void(std::uint64_t)> after_shard_chunk_;
  std::function<void()> before_publish_;

  void write_shard(const std::string& dir, std::int64_t step, int rank, std::size_t n = 1000) const {
    const std::vector<float> p = params(step, rank, n);
    ShardWriter w;
    w.add("params", p);
    w.add_scalar("step", step);
    w.write(shard_path(dir, rank), after_shard_chunk_);
  }

  // The whole protocol, as the trainer runs it (barriers elided: one process plays every rank).
  CheckpointInfo save(std::int64_t step, int world = 1, int keep = 0, std::size_t n = 1000) {
    prepare_staging(root(), step);
    for (int r = 0; r < world; ++r) write_shard(staging_dir(root(), step), step, r, n);
    return commit_checkpoint(root(), step, world, "recipe", keep, before_publish_);
  }

  // Opens every shard of info through the manifest and checks it holds exactly what save wrote.
  static void expect_intact(const CheckpointInfo& info, std::size_t n = 1000) {
    for (int r = 0; r < info.world_size; ++r) {
      const ShardReader reader = open_shard(info, r);
      std::vector<float> got(n);
      reader.read("params", got);
      EXPECT_TRUE(same_bits(got, params(info.step, r, n))) << info.dir << " rank " << r;
      EXPECT_EQ(reader.read_scalar("step"), info.step);
    }
  }

  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path root_;
};

// ---- shards ----------------------------------------------------------------------------------

TEST_F(CheckpointTest, ShardRoundTripIsBitExact) {
  const std::vector<float> a = tricky_floats(10007, 1);
  const std::vector<float> empty;
  const std::vector<std::int64_t> ints = {0, -1, std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::int64_t>::max(), 42};
  const std::vector<float> big = tricky_floats((3u << 20) / 4 + 5, 2);  // > one write chunk
  std::vector<float> m1(64, 0.5f), m2(3, -2.0f);
  const std::vector<StateTensor> state = {{"m1", m1}, {"m2", m2}};

  ShardWriter w;
  w.add("weights", a);
  w.add("empty", empty);
  w.add("ints", ints);
  w.add("big", big);
  w.add_scalar("step", 1234567890123);
  w.add_state("opt/", state);
  EXPECT_EQ(w.size(), 7u);
  const std::string path = (root_ / "rank-0.bin").string();
  w.write(path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const ShardReader r(path);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"weights", "empty", "ints", "big", "step", "opt/m1", "opt/m2"}));
  EXPECT_TRUE(r.has("weights"));
  EXPECT_FALSE(r.has("weight"));
  std::vector<float> got_a(a.size()), got_big(big.size()), got_empty;
  std::vector<std::int64_t> got_ints(ints.size());
  r.read("weights", got_a);
  r.read("big", got_big);
  r.read("empty", got_empty);
  r.read("ints", got_ints);
  EXPECT_TRUE(same_bits(got_a, a));
  EXPECT_TRUE(same_bits(got_big, big));
  EXPECT_EQ(got_ints, ints);
  EXPECT_EQ(r.read_scalar("step"), 1234567890123);
  std::vector<float> r1(64), r2(3);
  r.read_state("opt/", std::vector<StateTensor>{{"m1", r1}, {"m2", r2}});
  EXPECT_EQ(r1, m1);
  EXPECT_EQ(r2, m2);

  // The trailer is the xxh64 of everything before it.
  const std::vector<char> bytes = read_bytes(path);
  std::uint64_t trailer = 0;
  std::memcpy(&trailer, bytes.data() + bytes.size() - 8, 8);
  EXPECT_EQ(trailer, hash_bytes(bytes.data(), bytes.size() - 8));
  EXPECT_EQ(r.hash(), trailer);
  EXPECT_EQ(std::string(bytes.data(), 8), "LCKPSHRD");

  // Same entries, same bytes: writing is deterministic.
  w.write(path + "2");
  EXPECT_EQ(read_bytes(path + "2"), bytes);

  // Readers move (the mapping goes with them).
  ShardReader moved = ShardReader(path);
  moved = ShardReader(path + "2");
  std::vector<std::int64_t> again(ints.size());
  moved.read("ints", again);
  EXPECT_EQ(again, ints);
}

TEST_F(CheckpointTest, HashesAreXxh64) {
  EXPECT_EQ(hash_text(""), "ef46db3751d8e999");  // the reference XXH64 of no bytes, seed 0
  EXPECT_EQ(hash_text("abc"), "44bc2cf5ad770999");
  EXPECT_EQ(hash_text("abc").size(), 16u);
  EXPECT_NE(hash_text("recipe a"), hash_text("recipe b"));
  EXPECT_EQ(hex64(0x1f), "000000000000001f");
}

// Each damaged copy of a good shard must be refused with one line that names the file.
TEST_F(CheckpointTest, CorruptShardsAreRefusedWithOneLineNamingTheFile) {
  const std::vector<float> data = tricky_floats(1000, 3);
  ShardWriter w;
  w.add("params", data);
  w.add_scalar("step", 7);
  const fs::path good = root_ / "good.bin";
  w.write(good.string());
  const std::vector<char> bytes = read_bytes(good);

  struct Case {
    const char* name;
    std::function<void(std::vector<char>&)> damage;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"empty", [](std::vector<char>& b) { b.clear(); }, "truncated"},
      {"header_only", [](std::vector<char>& b) { b.resize(16); }, "truncated"},
      {"half", [](std::vector<char>& b) { b.resize(b.size() / 2); }, "truncated"},
      {"no_trailer", [](std::vector<char>& b) { b.erase(b.end() - 8, b.end()); }, "truncated"},
      {"one_byte_short", [](std::vector<char>& b) { b.pop_back(); }, "truncated"},
      {"trailing_garbage", [](std::vector<char>& b) { b.push_back('x'); }, "unexpected bytes"},
      {"flipped_data_byte", [](std::vector<char>& b) { b[100] ^= 0x10; }, "checksum mismatch"},
      {"flipped_trailer", [](std::vector<char>& b) { b.back() ^= 0x01; }, "checksum mismatch"},
      {"wrong_magic", [](std::vector<char>& b) { b[0] = 'X'; }, "bad magic"},
      {"wrong_version", [](std::vector<char>& b) { b[8] = 9; }, "format version 9"},
      {"huge_count", [](std::vector<char>& b) { b[16 + 4 + 6 + 1 + 7] = 0x7f; }, "truncated or corrupt"},
      {"unknown_kind", [](std::vector<char>& b) { b[16 + 4 + 6] = 5; }, "unknown kind 5"},
  };
  for (const Case& c : cases) {
    std::vector<char> damaged = bytes;
    c.damage(damaged);
    const fs::path p = root_ / (std::string(c.name) + ".bin");
    write_bytes(p, damaged);
    const std::string msg = input_error([&] { ShardReader r(p.string()); });
    EXPECT_TRUE(contains(msg, p.string())) << c.name << ": " << msg;
    EXPECT_TRUE(contains(msg, c.expect)) << c.name << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.name << ": " << msg;
  }
  const std::string missing = (root_ / "missing.bin").string();
  const std::string msg = input_error([&] { ShardReader r(missing); });
  EXPECT_TRUE(contains(msg, missing) && contains(msg, "No such file")) << msg;
}

TEST_F(CheckpointTest, ReadsCheckNamesKindsAndSizes) {
  const std::vector<float> data(10, 1.0f);
  ShardWriter w;
  w.add("params", data);
  w.add_scalar("step", 3);
  const std::string path = (root_ / "s.bin").string();
  w.write(path);
  const ShardReader r(path);

  std::vector<float> wrong_size(12);
  std::string msg = input_error([&] { r.read("params", wrong_size); });
  EXPECT_TRUE(contains(msg, path) && contains(msg, "'params'") && contains(msg, "has 10 values, expected 12")) << msg;
  std::vector<float> ok(10);
  msg = input_error([&] { r.read("moments", ok); });
  EXPECT_TRUE(contains(msg, path) && contains(msg, "no entry 'moments'")) << msg;
  std::vector<std::int64_t> as_int(10);
  msg = input_error([&] { r.read("params", as_int); });
  EXPECT_TRUE(contains(msg, "holds f32 values, expected i64")) << msg;
  msg = input_error([&] { r.read("step", ok); });
  EXPECT_TRUE(contains(msg, "holds i64 values, expected f32")) << msg;
  std::vector<float> state_buf(11);
  msg = input_error([&] { r.read_state("", std::vector<StateTensor>{{"params", state_buf}}); });
  EXPECT_TRUE(contains(msg, "has 10 values, expected 11")) << msg;
}

TEST_F(CheckpointTest, WriterMisuseAndUnwritablePaths) {
  const std::vector<float> data(4);
  ShardWriter w;
  w.add("a", data);
  EXPECT_THROW(w.add("a", data), Error);
  EXPECT_THROW(w.add_scalar("", 1), Error);
  // An output directory that cannot exist is bad input (exit 2), named in the message.
  const std::string bad = (root_ / "no" / "such" / "dir" / "rank-0.bin").string();
  std::string msg = input_error([&] { w.write(bad); });
  EXPECT_TRUE(contains(msg, bad) && contains(msg, "No such file")) << msg;
  const std::string file_root = (root_ / "a_file").string();
  write_bytes(file_root, {'x'});
  msg = input_error([&] { prepare_staging(file_root + "/ckpt", 1); });
  EXPECT_TRUE(contains(msg, file_root)) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// ---- commit and find -----------------------------------------------------------------------

TEST_F(CheckpointTest, CommitPublishesTheCheckpointAndRemovesStaging) {
  EXPECT_EQ(staging_dir("/r", 12), "/r/step-000000012.tmp");
  EXPECT_EQ(checkpoint_dir("/r", 12), "/r/step-000000012");
  EXPECT_EQ(shard_path("/r/step-000000012", 3), "/r/step-000000012/rank-3.bin");

  const CheckpointInfo info = save(12, /*world=*/3);
  EXPECT_EQ(info.dir, checkpoint_dir(root(), 12));
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000012"}));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(info.dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"MANIFEST.json", "rank-0.bin", "rank-1.bin", "rank-2.bin"}));

  const nlohmann::json m = nlohmann::json::parse(std::ifstream(info.dir + "/MANIFEST.json"));
  EXPECT_EQ(m["format"], 1);
  EXPECT_EQ(m["step"], 12);
  EXPECT_EQ(m["world_size"], 3);
  EXPECT_EQ(m["recipe_hash"], hash_text("recipe"));
  EXPECT_EQ(m["recipe"], "recipe");  // the text of the hash, for naming what differs on a resume
  ASSERT_EQ(m["shards"].size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const auto& s = m["shards"][r];
    const std::string path = shard_path(info.dir, r);
    EXPECT_EQ(s["file"], "rank-" + std::to_string(r) + ".bin");
    EXPECT_EQ(s["bytes"], fs::file_size(path));
    EXPECT_EQ(s["xxh64"], hex64(ShardReader(path).hash()));
  }

  const CheckpointInfo read = read_checkpoint_info(info.dir + "/");
  EXPECT_EQ(read.step, 12);
  EXPECT_EQ(read.world_size, 3);
  EXPECT_EQ(read.recipe_hash, hash_text("recipe"));
  EXPECT_EQ(read.recipe, "recipe");
  ASSERT_EQ(read.shards.size(), 3u);
  EXPECT_EQ(read.shards[2].xxh64, info.shards[2].xxh64);
  expect_intact(read);
  const std::string msg = input_error([&] { open_shard(read, 3); });
  EXPECT_TRUE(contains(msg, "written by 3 ranks")) << msg;
}

TEST_F(CheckpointTest, CommitWithoutEveryShardIsAnError) {
  prepare_staging(root(), 5);
  write_shard(staging_dir(root(), 5), 5, 0);
  EXPECT_THROW(commit_checkpoint(root(), 5, 2, "h", 0), Error);  // rank 1 never wrote
  EXPECT_FALSE(fs::exists(checkpoint_dir(root(), 5)));
  EXPECT_FALSE(find_latest_checkpoint(root()).has_value());
}

TEST_F(CheckpointTest, KeepLatestKeepsTheNewestAndPrunesOlderJunk) {
  save(1);
  save(2);
  // Junk older than the next commit goes; anything newer is never touched.
  fs::create_directories(staging_dir(root(), 3));
  fs::create_directories(checkpoint_dir(root(), 4));  // no manifest: half-pruned or crashed
  fs::create_directories(staging_dir(root(), 90));
  fs::create_directories(root() + "/notes");
  save(10, 1, /*keep=*/2);
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step-000000002", "step-000000010", "step-000000090.tmp"}));
  save(11, 1, 2);
  save(12, 1, 2);
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step-000000011", "step-000000012", "step-000000090.tmp"}));
  save(13, 1, 1);
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step-000000013", "step-000000090.tmp"}));
  save(14, 1, 0);  // 0 keeps all
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step-000000013", "step-000000014", "step-000000090.tmp"}));
  expect_intact(*find_latest_checkpoint(root()));
}

TEST_F(CheckpointTest, RecommittingAStepReplacesIt) {
  save(7, 1, 0, 1000);
  const CheckpointInfo second = save(7, 2, 0, 500);  // same step, other contents
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000007"}));
  const auto latest = find_latest_checkpoint(root());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->world_size, 2);
  EXPECT_EQ(latest->shards[0].xxh64, second.shards[0].xxh64);
  expect_intact(*latest, 500);
}

TEST_F(CheckpointTest, FindLatestReturnsOnlyCompleteCheckpointsNewestByNumber) {
  EXPECT_FALSE(find_latest_checkpoint(root()).has_value());  // no root yet
  save(3, 2);
  save(999999999);
  save(1000000000);  // 10 digits: sorts before step-999999999 by name, after it by number
  auto latest = find_latest_checkpoint(root());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1000000000);
  save(2000000000);
  save(2000000001);
  save(3000000001);

  // Damage every checkpoint but step 3, each in its own way (after the saves: commit prunes junk).
  fs::remove(checkpoint_dir(root(), 1000000000) + "/MANIFEST.json");
  fs::remove(shard_path(checkpoint_dir(root(), 999999999), 0));
  fs::resize_file(shard_path(checkpoint_dir(root(), 2000000000), 0), 100);
  write_bytes(checkpoint_dir(root(), 2000000001) + "/MANIFEST.json", {'{', '"'});
  fs::create_directories(staging_dir(root(), 3000000000));
  fs::rename(checkpoint_dir(root(), 3000000001), root() + "/step-3000000002");  // manifest says another step
  fs::create_directories(root() + "/step-4000000000x");                          // not ours: not even reported
  write_bytes(root() + "/step-5000000000", {'x'});                              // a file, not a directory

  std::vector<std::string> skipped;
  latest = find_latest_checkpoint(root(), [&](const std::string& why) { skipped.push_back(why); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 3);
  EXPECT_EQ(latest->world_size, 2);
  expect_intact(*latest);
  ASSERT_EQ(skipped.size(), 6u);
  EXPECT_TRUE(contains(skipped[0], "step-3000000002") && contains(skipped[0], "says step 3000000001")) << skipped[0];
  EXPECT_TRUE(contains(skipped[1], "step-3000000000.tmp") && contains(skipped[1], "staging")) << skipped[1];
  EXPECT_TRUE(contains(skipped[2], "step-2000000001/MANIFEST.json") && contains(skipped[2], "not valid JSON")) << skipped[2];
  EXPECT_TRUE(contains(skipped[3], "step-2000000000/rank-0.bin") && contains(skipped[3], "the manifest says")) << skipped[3];
  EXPECT_TRUE(contains(skipped[4], "step-1000000000/MANIFEST.json") && contains(skipped[4], "missing")) << skipped[4];
  EXPECT_TRUE(contains(skipped[5], "step-999999999/rank-0.bin") && contains(skipped[5], "missing")) << skipped[5];
  for (const std::string& s : skipped) EXPECT_EQ(s.find('\n'), std::string::npos) << s;
}

// Damage that keeps every size (flipped bytes, shards swapped between ranks) is found by a pass
// over the shards: the newest intact checkpoint is returned, each damaged one reported; when every
// committed checkpoint is damaged, that is an error, never "no checkpoint, start fresh".
TEST_F(CheckpointTest, FindLatestVerifiesShardsAndFallsBackToTheNewestIntact) {
  for (std::int64_t step : {10, 20, 30}) save(step, /*world=*/2);
  const auto flip_byte = [](const std::string& path) {
    std::vector<char> b = read_bytes(path);
    b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x40);
    write_bytes(path, b);
  };
  flip_byte(shard_path(checkpoint_dir(root(), 30), 1));
  std::vector<std::string> skipped;
  auto latest = find_latest_checkpoint(root(), [&](const std::string& why) { skipped.push_back(why); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 20);
  expect_intact(*latest);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_TRUE(contains(skipped[0], shard_path(checkpoint_dir(root(), 30), 1))) << skipped[0];
  std::string msg = input_error([&] { verify_checkpoint(read_checkpoint_info(checkpoint_dir(root(), 30))); });
  EXPECT_TRUE(contains(msg, "rank-1.bin")) << msg;

  // Rank 0's and rank 1's shards of step 20 swapped: both intact, both the manifest's size.
  const std::string r0 = shard_path(checkpoint_dir(root(), 20), 0), r1 = shard_path(checkpoint_dir(root(), 20), 1);
  ASSERT_EQ(fs::file_size(r0), fs::file_size(r1));
  fs::rename(r0, root() + "/swap");
  fs::rename(r1, r0);
  fs::rename(root() + "/swap", r1);
  latest = find_latest_checkpoint(root());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 10);

  flip_byte(shard_path(checkpoint_dir(root(), 10), 0));
  msg = input_error([&] { find_latest_checkpoint(root()); });
  EXPECT_TRUE(contains(msg, "no intact checkpoint") && contains(msg, "all 3 are damaged") &&
              contains(msg, checkpoint_dir(root(), 30)))
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  // Never committed (staging, no manifest) is not damage: nothing to resume, start fresh.
  fs::remove_all(root());
  fs::create_directories(staging_dir(root(), 5));
  fs::create_directories(checkpoint_dir(root(), 4));
  EXPECT_FALSE(find_latest_checkpoint(root()).has_value());
}

TEST_F(CheckpointTest, ExplicitResumePathMustBeComplete) {
  save(4);
  prepare_staging(root(), 5);
  write_shard(staging_dir(root(), 5), 5, 0);
  std::string msg = input_error([&] { read_checkpoint_info(staging_dir(root(), 5)); });
  EXPECT_TRUE(contains(msg, "staging directory")) << msg;
  msg = input_error([&] { read_checkpoint_info(root() + "/step-000000006"); });
  EXPECT_TRUE(contains(msg, "no such checkpoint directory")) << msg;

  // A shard swapped in from another checkpoint (same size, intact on its own) is caught by the
  // manifest's hash when opened.
  const std::string dir = checkpoint_dir(root(), 4);
  fs::copy_file(shard_path(staging_dir(root(), 5), 0), shard_path(dir, 0), fs::copy_options::overwrite_existing);
  const CheckpointInfo info = read_checkpoint_info(dir);
  msg = input_error([&] { open_shard(info, 0); });
  EXPECT_TRUE(contains(msg, shard_path(dir, 0)) && contains(msg, "does not match the manifest")) << msg;

  // Manifest fields are validated, not trusted (a file name cannot leave the directory).
  save(8);
  const std::string mpath = checkpoint_dir(root(), 8) + "/MANIFEST.json";
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(mpath));
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json m = good;
    edit(m);
    std::ofstream(mpath, std::ios::trunc) << m.dump();
    return input_error([&] { read_checkpoint_info(checkpoint_dir(root(), 8)); });
  };
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m["format"] = 2; }), "format 2")) ;
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m["world_size"] = 2; }), "'shards' must be an array"));
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m["shards"][0]["file"] = "../step-000000004/rank-0.bin"; }),
                       "shards[0].file"));
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m["shards"][0]["xxh64"] = "xyz"; }), "16 hex digits"));
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m.erase("recipe_hash"); }), "'recipe_hash'"));
  EXPECT_TRUE(contains(with([](nlohmann::json& m) { m["step"] = -1; }), "'step'"));
}

// ---- crashes -----------------------------------------------------------------------------------

// Polls cond every millisecond for up to 10 s: synchronises on what the child wrote, not on time.
bool wait_for(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

[[noreturn]] void block_forever() {
  for (;;) ::pause();
}

// Runs body in a forked child, waits until ready() holds, SIGKILLs the child and reaps it. The
// child parks itself (in a hook, or after body) so the kill lands exactly where the test says.
void kill_child_when(const std::function<void()>& body, const std::function<bool()>& ready) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    block_forever();
  }
  int status = 0;
  bool exited = false;
  const bool reached = wait_for([&] {
    exited = ::waitpid(pid, &status, WNOHANG) == pid;  // exited early: reported below
    return exited || ready();
  });
  ::kill(pid, SIGKILL);
  if (!exited) ::waitpid(pid, &status, 0);
  ASSERT_TRUE(reached) << "the child never reached the kill point";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child exited on its own: " << status;
}

std::uintmax_t size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

// The child writes step 2 with a 16 MiB shard and is killed with 2 MiB of it on disk.
TEST_F(CheckpointTest, KillMidShardWriteLeavesThePreviousCheckpoint) {
  save(1);
  const std::size_t n = 4u << 20;  // floats
  const std::string partial = shard_path(staging_dir(root(), 2), 0) + ".tmp";
  kill_child_when(
      [&] {
        after_shard_chunk_ = [](std::uint64_t written) {
          if (written >= (2u << 20)) block_forever();
        };
        save(2, 1, 1, n);
      },
      [&] { return size_or_zero(partial) >= (2u << 20); });
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000001", "step-000000002.tmp"}));
  EXPECT_LT(size_or_zero(partial), n * 4);

  std::vector<std::string> skipped;
  const auto latest = find_latest_checkpoint(root(), [&](const std::string& s) { skipped.push_back(s); });
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
  expect_intact(*latest);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_TRUE(contains(skipped[0], "step-000000002.tmp"));

  // The rerun writes step 2 over the debris.
  save(2, 1, 1, n);
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000002"}));
  expect_intact(*find_latest_checkpoint(root()), n);
}

// Killed with every shard written but before commit: step 2 is not a checkpoint.
TEST_F(CheckpointTest, KillBetweenShardWritesAndCommitLeavesThePreviousCheckpoint) {
  save(1, 2);
  const std::string staging = staging_dir(root(), 2);
  kill_child_when(
      [&] {
        prepare_staging(root(), 2);
        write_shard(staging, 2, 0);
        write_shard(staging, 2, 1);
      },
      [&] { return fs::exists(shard_path(staging, 1)); });
  const auto latest = find_latest_checkpoint(root());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
  expect_intact(*latest);
  EXPECT_FALSE(fs::exists(staging + "/MANIFEST.json"));
}

// Killed inside commit with the manifest durable but not yet published: still step 1.
TEST_F(CheckpointTest, KillDuringCommitLeavesThePreviousCheckpoint) {
  save(1);
  const std::string staging = staging_dir(root(), 2);
  kill_child_when(
      [&] {
        before_publish_ = [] { block_forever(); };
        save(2, 1, 1);
      },
      [&] { return fs::exists(staging + "/MANIFEST.json"); });
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000001", "step-000000002.tmp"}));
  const auto latest = find_latest_checkpoint(root());
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->step, 1);
  expect_intact(*latest);
  // The next commit (of a later step) clears the stale staging directory.
  save(3, 1, 2);
  EXPECT_EQ(listing(), (std::vector<std::string>{"step-000000001", "step-000000003"}));
}

}  // namespace
}  // namespace laconic
