// Checkpoint files: per-rank binary shards, a manifest, and a crash-safe commit protocol. This is
// only the file layer; what goes into a shard (parameters, optimizer and sync state, step, RNG
// state) is the trainer's business.
//
// ---- layout ------------------------------------------------------------------------------------
//
//   <root>/step-000001200/            one checkpoint: N = optimizer steps done, zero-padded to 9
//     rank-0.bin ... rank-<W-1>.bin   digits so names sort (larger N still parse: order is by N)
//     MANIFEST.json                   written last; its presence is what makes the directory count
//   <root>/step-000001300.tmp/        staging directory of a checkpoint being written
//
// MANIFEST.json: {"format": 1, "step": N, "world_size": W, "recipe_hash": "<16 hex digits>",
//                 "recipe": "<the TOML the hash is of>",
//                 "shards": [{"file": "rank-0.bin", "bytes": B, "xxh64": "<16 hex digits>"}, ...]}
// "recipe" (absent in checkpoints of earlier versions) lets a resume with another recipe name the
// keys that differ.
// A shard's "xxh64" is the hash stored in the shard's own trailer (of every byte before it), so
// commit needs no pass over the data and a reader can tell a shard from another checkpoint.
//
// ---- commit protocol (crash-safe: a kill at any point leaves the previous checkpoint usable) ----
//
//   rank 0:      prepare_staging(root, N)               // fresh <root>/step-N.tmp/
//   barrier
//   every rank:  ShardWriter w; w.add(...); w.write(shard_path(staging_dir(root, N), rank));
//                // rank-r.bin.tmp, fsync, rename to rank-r.bin, fsync the staging directory
//   barrier
//   rank 0:      commit_checkpoint(root, N, W, recipe_text, keep_latest);
//                // checks every shard, writes MANIFEST.json (tmp, fsync, rename), fsyncs the
//                // staging directory, renames step-N.tmp -> step-N, fsyncs <root>; then prunes
//
// Until the final rename nothing named step-N exists, and a directory named *.tmp or without
// MANIFEST.json is never taken for a checkpoint, so a crash before it leaves step-N invisible;
// after it the checkpoint is complete and durable. Pruning unlinks an old checkpoint's manifest
// before removing the rest, so a crash while pruning leaves an incomplete (ignored) directory,
// never a half-deleted one that looks complete. Every rank must see the same <root> (one host,
// or a shared filesystem).
//
// ---- shard format (binary, little-endian) --------------------------------------------------------
//
//   "LCKPSHRD"  u32 format version (1)  u32 entry count
//   per entry:  u32 name length, name bytes, u8 kind (0 = f32, 1 = i64), u64 element count, data
//   trailer:    u64 xxh64 (seed 0) of every byte before it
//
// Data is not aligned (readers copy it out). Reading validates the magic, the version, every
// length against the file size and the hash; any problem is an InputError naming the file.
//
// Errors: a bad or incomplete checkpoint, or a failed system call on a checkpoint path (an
// unwritable --out, a full disk) is an InputError naming the path (and strerror): the CLI exits
// with code 2. Misuse of the API (duplicate entry names, a negative step) is an Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/state.h"

namespace laconic {

// xxh64 (seed 0) of n bytes.
std::uint64_t hash_bytes(const void* data, std::size_t n);
// xxh64 of the text as 16 lowercase hex digits (the recipe hash).
std::string hash_text(std::string_view text);
// 16 lowercase hex digits.
std::string hex64(std::uint64_t v);

// ---- shards ----------------------------------------------------------------------------------

// Collects entries, then writes them as one shard. add() keeps views, not copies (a rank's state
// can be gigabytes): the data must stay alive and unchanged until write() returns.
class ShardWriter {
 public:
  void add(std::string name, std::span<const float> data);
  void add(std::string name, std::span<const std::int64_t> data);
  // A single value, copied (steps, seeds, counters: nothing to keep alive).
  void add_scalar(std::string name, std::int64_t value);
  // One f32 entry per tensor, named prefix + tensor.name.
  void add_state(const std::string& prefix, std::span<const StateTensor> state);

  // Writes path.tmp (in 1 MiB chunks), fsyncs it, renames it to path and fsyncs the directory.
  // A failure removes path.tmp and throws InputError naming the path. Callable more than once.
  // `after_chunk` (tests of crashes mid-write): called with the bytes written so far after each chunk.
  void write(const std::string& path, const std::function<void(std::uint64_t)>& after_chunk = {}) const;

  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    std::uint8_t kind;
    const void* data;  // nullptr: the owned scalar below
    std::uint64_t count;
    std::int64_t scalar = 0;
  };
  void add_entry(Entry e);
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// Maps a whole shard and validates it (structure and hash) on construction; reads then copy
// entries out. Move-only.
class ShardReader {
 public:
  explicit ShardReader(const std::string& path);
  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader();

  // Copy the named entry into out. A missing entry, another kind or another element count is an
  // InputError naming the file, the entry and both sizes.
  void read(std::string_view name, std::span<float> out) const;
  void read(std::string_view name, std::span<std::int64_t> out) const;
  std::int64_t read_scalar(std::string_view name) const;  // an i64 entry of exactly one value
  void read_state(const std::string& prefix, std::span<const StateTensor> state) const;

  bool has(std::string_view name) const;
  std::vector<std::string> names() const;  // in file order
  std::uint64_t hash() const { return hash_; }  // the trailer (what the manifest records)
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::uint8_t kind;
    std::uint64_t count;
    std::size_t offset;  // of the data in the file
  };
  const Entry& find(std::string_view name, std::uint8_t kind, std::size_t count) const;
  void release();

  std::string path_;
  const std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::uint64_t hash_ = 0;
  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<std::string> order_;
};

// ---- checkpoint directories ------------------------------------------------------------------

std::string checkpoint_dir(const std::string& root, std::int64_t step);  // <root>/step-N
std::string staging_dir(const std::string& root, std::int64_t step);     // <root>/step-N.tmp
std::string shard_path(const std::string& dir, int rank);                 // <dir>/rank-r.bin

// Rank 0, before the barrier that precedes the shard writes: creates root (and parents) and an
// empty staging directory, removing one left by an earlier crash at the same step.
void prepare_staging(const std::string& root, std::int64_t step);

struct ShardInfo {
  std::string file;     // "rank-0.bin", relative to the checkpoint directory
  std::uint64_t bytes;  // file size
  std::uint64_t xxh64;  // the shard's trailer
};

struct CheckpointInfo {
  std::string dir;  // <root>/step-N
  std::int64_t step = 0;
  int world_size = 0;
  std::string recipe_hash;
  std::string recipe;             // the text recipe_hash is of; "" in checkpoints of earlier versions
  std::vector<ShardInfo> shards;  // one per rank, in rank order
};

// Rank 0, after the barrier that follows the shard writes: publishes step-N (see the protocol
// above) and returns its info. `recipe_text`: what decides the run's numbers (recipe_identity); the
// manifest keeps it and its hash. A shard missing or malformed in the staging directory is an
// Error (the caller did not wait for every rank). If step-N already exists it is replaced
// atomically (renameat2 RENAME_EXCHANGE where the filesystem has it). Then removes complete
// checkpoints older than N beyond the keep_latest newest (the new one counts; 0 keeps all) and
// any leftover directories older than N that are not complete checkpoints (stale step-M.tmp
// staging, half-pruned step-M). Newer directories are never touched.
// `before_publish` (tests of crashes mid-commit): called once MANIFEST.json is durable in the
// staging directory, just before the rename that publishes it.
CheckpointInfo commit_checkpoint(const std::string& root, std::int64_t step, int world_size,
                                 const std::string& recipe_text, int keep_latest,
                                 const std::function<void()>& before_publish = {});

// The checkpoint in dir, for an explicit --resume PATH: the manifest must parse and agree with
// the directory's name, and every shard must exist with the manifest's size (shard hashes are
// checked when a shard is opened). InputError naming the file and what is wrong otherwise.
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Opens every shard of the checkpoint (a full pass over its bytes) and checks each against its own
// trailer and the manifest: damage that keeps the sizes (flipped bytes, shards swapped between
// ranks or checkpoints) is an InputError naming the shard.
void verify_checkpoint(const CheckpointInfo& info);

// The newest intact checkpoint under root (the largest step, by number, not name; every shard
// verified), or nullopt if there is none (or no root). Newer directories that are not usable are
// skipped, each reported through on_skip with a one-line reason: staging directories and ones
// without a manifest (never committed, or half-pruned), and damaged ones (a manifest, but a shard
// missing, resized or corrupt). If every committed checkpoint is damaged, that is an InputError
// naming the newest one's damage: a resume must not silently start over beside them.
std::optional<CheckpointInfo> find_latest_checkpoint(
    const std::string& root, const std::function<void(const std::string&)>& on_skip = {});

// Opens rank's shard of the checkpoint and checks its hash against the manifest's (a shard copied
// in from another checkpoint is an InputError even if it is intact on its own).
ShardReader open_shard(const CheckpointInfo& info, int rank);

}  // namespace laconic
