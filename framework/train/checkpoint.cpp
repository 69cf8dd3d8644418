#include "framework/train/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/input.h"
#include "core/json.h"

namespace laconic {
namespace {
namespace fs = std::filesystem;

// The format is little-endian and written with memcpy of native values.
static_assert(std::endian::native == std::endian::little, "checkpoint shards assume a little-endian host");

constexpr char kMagic[8] = {'L', 'C', 'K', 'P', 'S', 'H', 'R', 'D'};
constexpr std::uint32_t kShardVersion = 1;
constexpr int kManifestFormat = 1;
constexpr std::size_t kHeaderBytes = 16;  // magic, version, entry count
constexpr std::size_t kTrailerBytes = 8;
constexpr std::uint8_t kF32 = 0;
constexpr std::uint8_t kI64 = 1;
// Writes go out in chunks of this size: large enough that syscalls cost nothing, small enough
// that the test hook sees a file grow step by step.
constexpr std::size_t kChunk = std::size_t{1} << 20;
constexpr const char* kManifest = "MANIFEST.json";
constexpr std::uint64_t kMaxManifestBytes = 64ull << 20;  // 100 bytes a shard, a recipe of kilobytes

const char* kind_name(std::uint8_t kind) { return kind == kF32 ? "f32" : kind == kI64 ? "i64" : "?"; }
std::size_t kind_bytes(std::uint8_t kind) { return kind == kF32 ? 4 : 8; }

[[noreturn]] void sys_fail(const std::string& path, const char* what, int err) {
  LC_INPUT_ERROR(path, ": ", what, ": ", std::strerror(err));
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Makes the directory's entries (a rename into it) durable.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) sys_fail(dir, "cannot open directory to fsync it", errno);
  // EINVAL: a filesystem that cannot sync directories (some FUSE ones); nothing more to do there.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int err = errno;
    ::close(fd);
    sys_fail(dir, "fsync of directory failed", err);
  }
  ::close(fd);
}

// A file written under path.tmp and renamed to path once complete and fsynced; destroyed
// uncommitted (an exception), it removes path.tmp.
class AtomicFile {
 public:
  AtomicFile(std::string path, const std::function<void(std::uint64_t)>* after_chunk = nullptr)
      : path_(std::move(path)), tmp_(path_ + ".tmp"), after_chunk_(after_chunk) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) sys_fail(tmp_, "cannot create checkpoint file", errno);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  void write(const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min(n, kChunk));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) sys_fail(tmp_, "write failed", w < 0 ? errno : EIO);
      p += w;
      n -= static_cast<std::size_t>(w);
      written_ += static_cast<std::uint64_t>(w);
      if (after_chunk_ && *after_chunk_) (*after_chunk_)(written_);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) sys_fail(tmp_, "fsync failed", errno);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) sys_fail(tmp_, "close failed", errno);
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) sys_fail(path_, "rename from .tmp failed", errno);
    committed_ = true;
    fsync_dir(parent_of(path_));
  }

 private:
  std::string path_;
  std::string tmp_;
  const std::function<void(std::uint64_t)>* after_chunk_;  // may be null
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t written_ = 0;
};

struct XxhStateDeleter {
  void operator()(XXH64_state_t* s) const { XXH64_freeState(s); }
};

// Buffers the small header fields, passes large data straight through, hashes everything.
class ShardStream {
 public:
  ShardStream(const std::string& path, const std::function<void(std::uint64_t)>& after_chunk)
      : file_(path, &after_chunk), state_(XXH64_createState()) {
    LC_CHECK(state_ != nullptr, "XXH64_createState failed");
    XXH64_reset(state_.get(), 0);
    buf_.reserve(kChunk);
  }
  void put(const void* p, std::size_t n) {
    if (n == 0) return;
    XXH64_update(state_.get(), p, n);
    if (n >= kChunk) {
      flush();
      file_.write(p, n);
      return;
    }
    if (buf_.size() + n > kChunk) flush();
    buf_.append(static_cast<const char*>(p), n);
  }
  template <typename T>
  void put_value(T v) {
    put(&v, sizeof v);
  }
  void finish() {
    const std::uint64_t digest = XXH64_digest(state_.get());
    buf_.append(reinterpret_cast<const char*>(&digest), sizeof digest);  // the trailer is not hashed
    flush();
    file_.commit();
  }

 private:
  void flush() {
    file_.write(buf_.data(), buf_.size());
    buf_.clear();
  }
  AtomicFile file_;
  std::unique_ptr<XXH64_state_t, XxhStateDeleter> state_;
  std::string buf_;
};

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// "step-<digits><suffix>": the step and the suffix ("" for a checkpoint, ".tmp" for staging).
struct StepName {
  std::int64_t step;
  std::string suffix;
};
std::optional<StepName> parse_step_name(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  std::size_t i = 5;
  std::int64_t step = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 5 + 18) step = step * 10 + (name[i++] - '0');
  if (i == 5 || (i < name.size() && name[i] >= '0' && name[i] <= '9')) return std::nullopt;  // none, or > 18
  StepName out{step, name.substr(i)};
  if (!out.suffix.empty() && (out.suffix.size() < 4 || out.suffix.substr(out.suffix.size() - 4) != ".tmp"))
    return std::nullopt;
  return out;
}

std::string step_name(std::int64_t step) {
  LC_CHECK(step >= 0, "checkpoint step must be >= 0, got ", step);
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// The size and trailer of a shard in the staging directory, read without reading the data.
ShardInfo probe_shard(const std::string& dir, int rank) {
  const std::string path = shard_path(dir, rank);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      throw Error(path + ": missing at commit (every rank must have written its shard before rank 0 commits)");
    sys_fail(path, "cannot open", errno);
  }
  struct stat st {};
  char magic[8];
  std::uint64_t trailer = 0;
  const bool ok = ::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(kHeaderBytes + kTrailerBytes) &&
                  ::pread(fd, magic, 8, 0) == 8 && std::memcmp(magic, kMagic, 8) == 0 &&
                  ::pread(fd, &trailer, 8, st.st_size - 8) == 8;
  ::close(fd);
  if (!ok) throw Error(path + ": not a complete checkpoint shard at commit");
  return ShardInfo{fs::path(path).filename().string(), static_cast<std::uint64_t>(st.st_size), trailer};
}

// Unlinks the manifest first, so a crash halfway through leaves a directory that is visibly
// incomplete rather than one that looks complete with shards missing.
void remove_checkpoint_dir(const std::string& dir) {
  const std::string manifest = join(dir, kManifest);
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT) sys_fail(manifest, "cannot remove", errno);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) LC_INPUT_ERROR(dir, ": cannot remove old checkpoint: ", ec.message());
}

// Removes what commit of `step` makes obsolete (see commit_checkpoint in the header).
void prune(const std::string& root, std::int64_t step, int keep_latest) {
  std::vector<std::pair<std::int64_t, std::string>> complete;
  std::vector<std::string> junk;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto parsed = parse_step_name(it->path().filename().string());
    std::error_code dir_ec;
    if (!parsed || parsed->step >= step || !it->is_directory(dir_ec)) continue;
    const std::string path = it->path().string();
    if (parsed->suffix.empty() && fs::exists(join(path, kManifest)))
      complete.emplace_back(parsed->step, path);
    else
      junk.push_back(path);
  }
  if (ec) LC_INPUT_ERROR(root, ": cannot list checkpoint directory: ", ec.message());
  for (const std::string& dir : junk) remove_checkpoint_dir(dir);
  if (keep_latest == 0) return;
  std::sort(complete.begin(), complete.end(), std::greater<>());
  for (std::size_t i = static_cast<std::size_t>(keep_latest - 1); i < complete.size(); ++i)
    remove_checkpoint_dir(complete[i].second);
}

// Publishes staging as final. An existing final (the same step committed again) is swapped out
// atomically where the filesystem supports it, then removed.
void publish(const std::string& staging, const std::string& final_dir) {
  struct stat st {};
  if (::lstat(final_dir.c_str(), &st) != 0) {
    if (std::rename(staging.c_str(), final_dir.c_str()) != 0) sys_fail(final_dir, "rename of staging directory failed", errno);
    return;
  }
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    remove_checkpoint_dir(staging);  // now the old checkpoint
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    sys_fail(final_dir, "rename of staging directory failed", errno);
  // No exchange here: a crash between the two renames loses step N (older ones remain).
  const std::string old = final_dir + ".old.tmp";
  remove_checkpoint_dir(old);
  if (std::rename(final_dir.c_str(), old.c_str()) != 0) sys_fail(final_dir, "cannot move aside", errno);
  if (std::rename(staging.c_str(), final_dir.c_str()) != 0) sys_fail(final_dir, "rename of staging directory failed", errno);
  remove_checkpoint_dir(old);
}

// ---- manifest fields ----

std::int64_t manifest_int(const nlohmann::json& m, const char* key, const std::string& path, std::int64_t min) {
  const auto it = m.find(key);
  if (it == m.end() || !it->is_number_integer() || it->get<std::int64_t>() < min)
    LC_INPUT_ERROR(path, ": '", key, "' must be an integer >= ", min);
  return it->get<std::int64_t>();
}

std::uint64_t parse_hex64(const std::string& s, bool& ok) {
  ok = s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return ok ? std::stoull(s, nullptr, 16) : 0;
}

}  // namespace

// ---- hashing -----------------------------------------------------------------------------------

std::uint64_t hash_bytes(const void* data, std::size_t n) { return XXH64(data, n, 0); }

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string hash_text(std::string_view text) { return hex64(hash_bytes(text.data(), text.size())); }

// ---- ShardWriter -------------------------------------------------------------------------------

void ShardWriter::add_entry(Entry e) {
  LC_CHECK(!e.name.empty(), "checkpoint entry names must not be empty");
  LC_CHECK(e.name.size() <= 0xffffffffu, "checkpoint entry name too long");
  const auto [it, inserted] = index_.emplace(e.name, entries_.size());
  LC_CHECK(inserted, "checkpoint entry '", e.name, "' added twice");
  entries_.push_back(std::move(e));
}

void ShardWriter::add(std::string name, std::span<const float> data) {
  add_entry(Entry{std::move(name), kF32, data.data(), data.size()});
}

void ShardWriter::add(std::string name, std::span<const std::int64_t> data) {
  add_entry(Entry{std::move(name), kI64, data.data(), data.size()});
}

void ShardWriter::add_scalar(std::string name, std::int64_t value) {
  add_entry(Entry{std::move(name), kI64, nullptr, 1, value});
}

void ShardWriter::add_state(const std::string& prefix, std::span<const StateTensor> state) {
  for (const StateTensor& t : state) {
    LC_CHECK(t.device == Device::cpu, "checkpoint tensor ", prefix, t.name, " lives on ", name_of(t.device),
             ": stage it through the host");
    add(prefix + t.name, std::span<const float>(t.data));
  }
}

void ShardWriter::write(const std::string& path, const std::function<void(std::uint64_t)>& after_chunk) const {
  ShardStream out(path, after_chunk);
  out.put(kMagic, sizeof kMagic);
  out.put_value<std::uint32_t>(kShardVersion);
  out.put_value<std::uint32_t>(static_cast<std::uint32_t>(entries_.size()));
  for (const Entry& e : entries_) {
    out.put_value<std::uint32_t>(static_cast<std::uint32_t>(e.name.size()));
    out.put(e.name.data(), e.name.size());
    out.put_value<std::uint8_t>(e.kind);
    out.put_value<std::uint64_t>(e.count);
    out.put(e.data ? e.data : &e.scalar, e.count * kind_bytes(e.kind));
  }
  out.finish();
}

// ---- ShardReader -------------------------------------------------------------------------------

namespace {

// A shard mapped whole, read-only. Mapped, not read: a rank's shard can be gigabytes, and entries
// are copied out only once.
struct MappedShard {
  const std::byte* base;
  std::size_t size;
};

MappedShard map_shard(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) sys_fail(path, "cannot open checkpoint shard", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    sys_fail(path, "cannot stat checkpoint shard", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    LC_INPUT_ERROR(path, ": not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < kHeaderBytes + kTrailerBytes) {
    ::close(fd);
    LC_INPUT_ERROR(path, ": truncated checkpoint shard (", size, " bytes; a shard has at least ",
                   kHeaderBytes + kTrailerBytes, ")");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) sys_fail(path, "cannot map checkpoint shard", map_err);
  return {static_cast<const std::byte*>(map), size};
}

// The header's magic and version; returns its entry count.
std::uint32_t check_shard_header(const std::byte* base, const std::string& path) {
  if (std::memcmp(base, kMagic, sizeof kMagic) != 0) LC_INPUT_ERROR(path, ": not a Laconic checkpoint shard (bad magic)");
  const auto version = load<std::uint32_t>(base + 8);
  if (version != kShardVersion)
    LC_INPUT_ERROR(path, ": checkpoint shard format version ", version, ", this build reads version ", kShardVersion);
  return load<std::uint32_t>(base + 12);
}

struct ShardEntry {
  std::string name;
  std::uint8_t kind;
  std::uint64_t count;
  std::size_t offset;  // of the data in the file
};

// Walks the entries of a shard's data region [kHeaderBytes, end), checking that each fits in it.
class EntryCursor {
 public:
  EntryCursor(const std::byte* base, std::size_t size, std::uint32_t count, const std::string& path)
      : base_(base), size_(size), end_(size - kTrailerBytes), count_(count), path_(path) {}

  // Entry `index`, its data skipped.
  ShardEntry next(std::uint32_t index) {
    need(4, index, "name length");
    const auto name_len = load<std::uint32_t>(base_ + at_);
    at_ += 4;
    need(name_len, index, "name");
    ShardEntry e{std::string(reinterpret_cast<const char*>(base_ + at_), name_len), 0, 0, 0};
    at_ += name_len;
    need(9, index, "kind and count");
    e.kind = load<std::uint8_t>(base_ + at_);
    e.count = load<std::uint64_t>(base_ + at_ + 1);
    at_ += 9;
    if (e.kind != kF32 && e.kind != kI64)
      LC_INPUT_ERROR(path_, ": corrupt: entry '", printable(e.name), "' has unknown kind ", int{e.kind});
    if (e.count > (end_ - at_) / kind_bytes(e.kind))
      LC_INPUT_ERROR(path_, ": truncated or corrupt: entry '", printable(e.name), "' holds ", e.count, " ",
                     kind_name(e.kind), " values but only ", end_ - at_, " bytes of data remain (", size_,
                     " bytes in the file)");
    e.offset = at_;
    at_ += static_cast<std::size_t>(e.count) * kind_bytes(e.kind);
    return e;
  }

  // After the last entry: the data region holds nothing more.
  void check_end() const {
    if (at_ != end_)
      LC_INPUT_ERROR(path_, ": corrupt: ", end_ - at_, " unexpected bytes after the last of ", count_, " entries");
  }

 private:
  void need(std::size_t n, std::uint32_t index, const char* what) const {
    if (end_ - at_ < n)
      LC_INPUT_ERROR(path_, ": truncated or corrupt: entry ", index, " of ", count_, ": ", what, " at byte ", at_,
                     " runs past the end of the data (", size_, " bytes in the file)");
  }

  const std::byte* base_;
  std::size_t size_, end_, at_ = kHeaderBytes;
  std::uint32_t count_;
  const std::string& path_;
};

// The trailer's hash, checked against the data before it.
std::uint64_t checked_hash(const std::byte* base, std::size_t size, const std::string& path) {
  const std::size_t end = size - kTrailerBytes;
  const auto stored = load<std::uint64_t>(base + end);
  const std::uint64_t computed = hash_bytes(base, end);
  if (computed != stored)
    LC_INPUT_ERROR(path, ": checksum mismatch (stored ", hex64(stored), ", computed ", hex64(computed),
                   "): the file is corrupt");
  return stored;
}

}  // namespace

ShardReader::ShardReader(const std::string& path) : path_(path) {
  const MappedShard mapped = map_shard(path);
  base_ = mapped.base;
  size_ = mapped.size;
  try {
    const std::uint32_t count = check_shard_header(base_, path);
    EntryCursor cursor(base_, size_, count, path);
    for (std::uint32_t i = 0; i < count; ++i) {
      ShardEntry e = cursor.next(i);
      if (entries_.count(e.name) != 0) LC_INPUT_ERROR(path, ": corrupt: entry '", printable(e.name), "' appears twice");
      entries_.emplace(e.name, Entry{e.kind, e.count, e.offset});
      order_.push_back(std::move(e.name));
    }
    cursor.check_end();
    hash_ = checked_hash(base_, size_, path);
  } catch (...) {
    release();
    throw;
  }
}

ShardReader::ShardReader(ShardReader&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      hash_(other.hash_),
      entries_(std::move(other.entries_)),
      order_(std::move(other.order_)) {}

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    hash_ = other.hash_;
    entries_ = std::move(other.entries_);
    order_ = std::move(other.order_);
  }
  return *this;
}

ShardReader::~ShardReader() { release(); }

void ShardReader::release() {
  if (base_) ::munmap(const_cast<std::byte*>(base_), size_);
  base_ = nullptr;
  size_ = 0;
}

const ShardReader::Entry& ShardReader::find(std::string_view name, std::uint8_t kind, std::size_t count) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) LC_INPUT_ERROR(path_, ": no entry '", printable(name), "' in the checkpoint shard");
  const Entry& e = it->second;
  if (e.kind != kind)
    LC_INPUT_ERROR(path_, ": entry '", printable(name), "' holds ", kind_name(e.kind), " values, expected ", kind_name(kind));
  if (e.count != count)
    LC_INPUT_ERROR(path_, ": entry '", printable(name), "' has ", e.count, " values, expected ", count);
  return e;
}

void ShardReader::read(std::string_view name, std::span<float> out) const {
  const Entry& e = find(name, kF32, out.size());
  if (!out.empty()) std::memcpy(out.data(), base_ + e.offset, out.size_bytes());
}

void ShardReader::read(std::string_view name, std::span<std::int64_t> out) const {
  const Entry& e = find(name, kI64, out.size());
  if (!out.empty()) std::memcpy(out.data(), base_ + e.offset, out.size_bytes());
}

std::int64_t ShardReader::read_scalar(std::string_view name) const {
  std::int64_t v = 0;
  read(name, std::span<std::int64_t>(&v, 1));
  return v;
}

void ShardReader::read_state(const std::string& prefix, std::span<const StateTensor> state) const {
  for (const StateTensor& t : state) {
    LC_CHECK(t.device == Device::cpu, "checkpoint tensor ", prefix, t.name, " lives on ", name_of(t.device),
             ": stage it through the host");
    read(prefix + t.name, t.data);
  }
}

bool ShardReader::has(std::string_view name) const { return entries_.find(name) != entries_.end(); }

std::vector<std::string> ShardReader::names() const { return order_; }

// ---- checkpoint directories --------------------------------------------------------------------

std::string checkpoint_dir(const std::string& root, std::int64_t step) { return join(root, step_name(step)); }

std::string staging_dir(const std::string& root, std::int64_t step) { return join(root, step_name(step) + ".tmp"); }

std::string shard_path(const std::string& dir, int rank) {
  LC_CHECK(rank >= 0, "rank must be >= 0, got ", rank);
  return join(dir, "rank-" + std::to_string(rank) + ".bin");
}

void prepare_staging(const std::string& root, std::int64_t step) {
  const std::string staging = staging_dir(root, step);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) LC_INPUT_ERROR(root, ": cannot create checkpoint directory: ", ec.message());
  fs::remove_all(staging, ec);  // left by a crash at this step
  if (ec) LC_INPUT_ERROR(staging, ": cannot remove stale staging directory: ", ec.message());
  fs::create_directory(staging, ec);
  if (ec) LC_INPUT_ERROR(staging, ": cannot create staging directory: ", ec.message());
}

CheckpointInfo commit_checkpoint(const std::string& root, std::int64_t step, int world_size,
                                 const std::string& recipe_text, int keep_latest,
                                 const std::function<void()>& before_publish) {
  LC_CHECK(world_size >= 1, "world_size must be >= 1, got ", world_size);
  LC_CHECK(keep_latest >= 0, "keep_latest must be >= 0 (0 keeps all), got ", keep_latest);
  const std::string staging = staging_dir(root, step);
  const std::string final_dir = checkpoint_dir(root, step);
  std::error_code ec;
  LC_CHECK(fs::is_directory(staging, ec), staging, ": no staging directory (prepare_staging first)");

  CheckpointInfo info{final_dir, step, world_size, hash_text(recipe_text), recipe_text, {}};
  nlohmann::ordered_json m;
  m["format"] = kManifestFormat;
  m["step"] = step;
  m["world_size"] = world_size;
  m["recipe_hash"] = info.recipe_hash;
  m["recipe"] = recipe_text;
  m["shards"] = nlohmann::ordered_json::array();
  for (int r = 0; r < world_size; ++r) {
    info.shards.push_back(probe_shard(staging, r));
    const ShardInfo& s = info.shards.back();
    m["shards"].push_back({{"file", s.file}, {"bytes", s.bytes}, {"xxh64", hex64(s.xxh64)}});
  }
  const std::string text = m.dump(2) + "\n";
  AtomicFile manifest(join(staging, kManifest));
  manifest.write(text.data(), text.size());
  manifest.commit();  // also fsyncs the staging directory: shards and manifest are durable

  if (before_publish) before_publish();
  publish(staging, final_dir);
  fsync_dir(root);
  prune(root, step, keep_latest);
  return info;
}

CheckpointInfo read_checkpoint_info(const std::string& dir_in) {
  fs::path dir(dir_in);
  if (dir.filename().empty()) dir = dir.parent_path();  // "step-N/"
  const std::string d = dir.string();
  const std::string name = dir.filename().string();
  if (name.size() >= 4 && name.substr(name.size() - 4) == ".tmp")
    LC_INPUT_ERROR(d, ": a staging directory (the checkpoint was never committed), not a checkpoint");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) LC_INPUT_ERROR(d, ": no such checkpoint directory");
  const std::string mpath = join(d, kManifest);
  if (!fs::exists(mpath, ec)) LC_INPUT_ERROR(mpath, ": missing: the checkpoint is incomplete");
  // Untrusted like any file: bounded in size (the shard list and the recipe text) and depth.
  const nlohmann::json m = parse_json(read_input_file(mpath, kMaxManifestBytes, "checkpoint manifest"), mpath);
  if (!m.is_object()) LC_INPUT_ERROR(mpath, ": not a JSON object");
  const std::int64_t format = manifest_int(m, "format", mpath, 0);
  if (format != kManifestFormat)
    LC_INPUT_ERROR(mpath, ": checkpoint format ", format, ", this build reads format ", kManifestFormat);

  CheckpointInfo info;
  info.dir = d;
  info.step = manifest_int(m, "step", mpath, 0);
  const std::int64_t world = manifest_int(m, "world_size", mpath, 1);
  if (world > 1 << 24) LC_INPUT_ERROR(mpath, ": 'world_size' ", world, " is implausible");
  info.world_size = static_cast<int>(world);
  if (!m.contains("recipe_hash") || !m["recipe_hash"].is_string()) LC_INPUT_ERROR(mpath, ": 'recipe_hash' must be a string");
  info.recipe_hash = m["recipe_hash"].get<std::string>();
  if (m.contains("recipe")) {
    if (!m["recipe"].is_string()) LC_INPUT_ERROR(mpath, ": 'recipe' must be a string");
    info.recipe = m["recipe"].get<std::string>();
  }
  if (const auto parsed = parse_step_name(name); parsed && parsed->suffix.empty() && parsed->step != info.step)
    LC_INPUT_ERROR(mpath, ": says step ", info.step, " but the directory is ", name);

  if (!m.contains("shards") || !m["shards"].is_array() || m["shards"].size() != static_cast<std::size_t>(world))
    LC_INPUT_ERROR(mpath, ": 'shards' must be an array of world_size (", world, ") entries");
  for (int r = 0; r < info.world_size; ++r) {
    const nlohmann::json& s = m["shards"][static_cast<std::size_t>(r)];
    const std::string expected_file = "rank-" + std::to_string(r) + ".bin";
    // The file name is fixed by the rank: a manifest cannot point outside its directory.
    if (!s.is_object() || !s.contains("file") || s["file"] != expected_file)
      LC_INPUT_ERROR(mpath, ": shards[", r, "].file must be \"", expected_file, "\"");
    if (!s.contains("bytes") || !s["bytes"].is_number_unsigned())
      LC_INPUT_ERROR(mpath, ": shards[", r, "].bytes must be a non-negative integer");
    bool ok = s.contains("xxh64") && s["xxh64"].is_string();
    const std::uint64_t xxh = ok ? parse_hex64(s["xxh64"].get<std::string>(), ok) : 0;
    if (!ok) LC_INPUT_ERROR(mpath, ": shards[", r, "].xxh64 must be a string of 16 hex digits");
    ShardInfo shard{expected_file, s["bytes"].get<std::uint64_t>(), xxh};
    const std::string spath = join(d, expected_file);
    struct stat st {};
    if (::stat(spath.c_str(), &st) != 0) {
      if (errno == ENOENT) LC_INPUT_ERROR(spath, ": missing: the checkpoint is incomplete");
      sys_fail(spath, "cannot stat checkpoint shard", errno);
    }
    if (static_cast<std::uint64_t>(st.st_size) != shard.bytes)
      LC_INPUT_ERROR(spath, ": ", st.st_size, " bytes, the manifest says ", shard.bytes, " (incomplete or modified)");
    info.shards.push_back(std::move(shard));
  }
  return info;
}

std::optional<CheckpointInfo> find_latest_checkpoint(const std::string& root,
                                                     const std::function<void(const std::string&)>& on_skip) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return std::nullopt;
  if (!fs::is_directory(root, ec)) LC_INPUT_ERROR(root, ": not a directory (expected a checkpoint directory)");
  struct Candidate {
    std::int64_t step;
    bool staging;
    std::string path;
  };
  std::vector<Candidate> candidates;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto parsed = parse_step_name(it->path().filename().string());
    std::error_code dir_ec;
    if (parsed && it->is_directory(dir_ec)) candidates.push_back({parsed->step, !parsed->suffix.empty(), it->path().string()});
  }
  if (ec) LC_INPUT_ERROR(root, ": cannot list checkpoint directory: ", ec.message());
  // Newest first by number (names stop sorting at 10 digits); at one step, the checkpoint first.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.step != b.step ? a.step > b.step : (a.staging != b.staging ? !a.staging : a.path < b.path);
  });
  std::string damage;  // the newest damaged checkpoint's reason
  int damaged = 0;
  for (const Candidate& c : candidates) {
    if (c.staging) {
      if (on_skip) on_skip(c.path + ": staging directory of an unfinished checkpoint, ignored");
      continue;
    }
    try {
      CheckpointInfo info = read_checkpoint_info(c.path);
      verify_checkpoint(info);
      return info;
    } catch (const InputError& e) {
      if (fs::exists(join(c.path, kManifest), ec)) {  // committed once: damaged, not unfinished
        if (damaged++ == 0) damage = e.what();
      }
      if (on_skip) on_skip(e.what());
    }
  }
  if (damaged > 0)
    LC_INPUT_ERROR(root, ": no intact checkpoint: ", damaged == 1 ? "the only one is damaged: " : "all ",
                   damaged == 1 ? "" : std::to_string(damaged) + " are damaged, the newest: ", damage);
  return std::nullopt;
}

void verify_checkpoint(const CheckpointInfo& info) {
  for (int r = 0; r < info.world_size; ++r) open_shard(info, r);
}

ShardReader open_shard(const CheckpointInfo& info, int rank) {
  if (rank < 0 || rank >= info.world_size || static_cast<std::size_t>(rank) >= info.shards.size())
    LC_INPUT_ERROR(info.dir, ": written by ", info.world_size, " ranks, there is no shard for rank ", rank);
  const ShardInfo& s = info.shards[static_cast<std::size_t>(rank)];
  ShardReader reader(join(info.dir, s.file));
  if (reader.hash() != s.xxh64)
    LC_INPUT_ERROR(reader.path(), ": hash ", hex64(reader.hash()), " does not match the manifest's ", hex64(s.xxh64),
                   " (a shard from another checkpoint?)");
  return reader;
}

}  // namespace laconic
