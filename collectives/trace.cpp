#include "collectives/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "collectives/collective_kind.h"
#include "core/check.h"
#include "core/input.h"

namespace laconic {

namespace {
constexpr std::size_t kFlushEvents = 1 << 15;  // 1.5 MB per lane between writes

void write_all(int fd, const void* data, std::size_t bytes, const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    LC_CHECK(n > 0, "trace: cannot write ", what, ": ", std::strerror(errno));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}
}  // namespace

std::string trace_lane_path(const std::string& dir, int rank, int lane) {
  return dir + "/rank-" + std::to_string(rank) + ".lane-" + std::to_string(lane) + ".bin";
}

Tracer::Tracer(std::string dir, int rank, int size, std::chrono::steady_clock::time_point origin)
    : dir_(std::move(dir)), rank_(rank), size_(size), origin_(origin), main_(std::this_thread::get_id()) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  LC_CHECK(!ec, "trace: cannot create ", dir_, ": ", ec.message());
  for (int l = 0; l < 2; ++l) {
    lanes_[l].buf.reserve(kFlushEvents);
    open(l);
  }
}

Tracer::~Tracer() {
  try {
    close();
  } catch (...) {  // a destructor: the files stay unclosed (and read back as truncated)
  }
  for (Lane& l : lanes_)
    if (l.fd >= 0) ::close(l.fd);
}

void Tracer::open(int lane) {
  const std::string path = trace_lane_path(dir_, rank_, lane);
  Lane& l = lanes_[lane];
  l.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LC_CHECK(l.fd >= 0, "trace: cannot create ", path, ": ", std::strerror(errno));
  TraceFileHeader h{};
  std::memcpy(h.magic, kTraceMagic, sizeof h.magic);
  h.version = 3;
  h.rank = rank_;
  h.size = size_;
  h.lane = lane;
  h.events = 0;
  write_all(l.fd, &h, sizeof h, path);
}

double Tracer::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

void Tracer::flush(int lane) {
  Lane& l = lanes_[lane];
  if (l.buf.empty()) return;
  write_all(l.fd, l.buf.data(), l.buf.size() * sizeof(TraceEvent), trace_lane_path(dir_, rank_, lane));
  l.written += l.buf.size();
  l.buf.clear();
}

void Tracer::record(const TraceEvent& e) {
  const int l = lane();
  Lane& ln = lanes_[l];
  ln.buf.push_back(e);
  if (ln.buf.size() == kFlushEvents) flush(l);
}

void Tracer::instant(TraceKind kind, std::int32_t a, std::uint8_t sub) {
  TraceEvent e;
  e.t0 = e.t1 = now();
  e.kind = kind;
  e.a = a;
  e.sub = sub;
  record(e);
}

void Tracer::step(std::int64_t step) { instant(TraceKind::step, static_cast<std::int32_t>(step)); }
void Tracer::span_begin(SpanKind k) { instant(TraceKind::span_begin, 0, static_cast<std::uint8_t>(k)); }
void Tracer::span_end(SpanKind k) { instant(TraceKind::span_end, 0, static_cast<std::uint8_t>(k)); }

std::int32_t Tracer::issue(OpLabel label) {
  const std::int32_t op = issued_.fetch_add(1, std::memory_order_relaxed);
  TraceEvent e;
  e.t0 = e.t1 = now();
  e.kind = TraceKind::issue;
  e.a = op;
  e.sub = label.kind;
  e.b = label.index;
  record(e);
  return op;
}

const char* op_label_name(OpLabel::Kind k) {
  switch (k) {
    case OpLabel::bucket: return "bucket";
    case OpLabel::fragment: return "fragment";
    default: return "";
  }
}

void Tracer::begin() { instant(TraceKind::begin, begun_); }
void Tracer::end() { instant(TraceKind::end, begun_++); }

void Tracer::message(TraceKind kind, double t0, std::int32_t to, std::uint64_t bytes, int tier, std::int32_t from,
                     std::uint64_t bytes2, int tier2, std::uint8_t plane) {
  TraceEvent e;
  e.t0 = t0;
  e.t1 = now();
  e.kind = kind;
  e.a = to;
  e.bytes = bytes;
  e.tier = static_cast<std::uint8_t>(tier);
  e.b = from;
  e.bytes2 = bytes2;
  e.tier2 = static_cast<std::uint8_t>(tier2);
  e.plane = plane;
  record(e);
}

void Tracer::wait(std::int32_t op, double t0) {
  TraceEvent e;
  e.t0 = t0;
  e.t1 = now();
  e.kind = TraceKind::wait;
  e.a = op;
  if (op > waited_) waited_ = op;
  record(e);
}

void Tracer::close() {
  if (closed_) return;
  closed_ = true;
  for (int l = 0; l < 2; ++l) {
    flush(l);
    Lane& ln = lanes_[l];
    const std::uint64_t n = ln.written;
    LC_CHECK(::pwrite(ln.fd, &n, sizeof n, offsetof(TraceFileHeader, events)) == sizeof n, "trace: cannot finish ",
             trace_lane_path(dir_, rank_, l), ": ", std::strerror(errno));
    ::close(ln.fd);
    ln.fd = -1;
  }
}

TraceLane read_trace_lane(const std::string& path) {
  const InputFile in(path, kMaxTraceBytes, "trace file");
  TraceFileHeader h{};
  if (in.size() >= sizeof h) in.read_at(0, &h, sizeof h);
  if (in.size() < sizeof h || std::memcmp(h.magic, kTraceMagic, sizeof h.magic) != 0)
    LC_INPUT_ERROR(path, ": not a Laconic trace file (expected the magic LCTRACE1)");
  if (h.version < 1 || h.version > 3) LC_INPUT_ERROR(path, ": trace version ", h.version, ", expected 1 to 3");
  const std::uint64_t body = in.size() - sizeof h;
  if (body % sizeof(TraceEvent) != 0 || body / sizeof(TraceEvent) != h.events || (h.events == 0 && body != 0))
    LC_INPUT_ERROR(path, ": truncated or unfinished trace (header says ", h.events, " events, the file holds ",
                   body / sizeof(TraceEvent), "); the run did not end cleanly");
  TraceLane t;
  t.rank = h.rank;
  t.size = h.size;
  t.lane = h.lane;
  t.version = static_cast<int>(h.version);
  t.events.resize(h.events);
  in.read_at(sizeof h, t.events.data(), body);
  if (h.version == 1)
    for (TraceEvent& e : t.events) e.plane = 0;  // version 1 left it as padding
  return t;
}

const char* span_name(SpanKind k) {
  switch (k) {
    case SpanKind::forward_backward: return "forward/backward";
    case SpanKind::optimizer: return "optimizer";
    case SpanKind::sync: return "sync (host)";
    case SpanKind::outer_sync: return "outer sync (host)";
  }
  return "compute";
}

const char* message_name(const TraceEvent& e) {
  switch (e.kind) {
    case TraceKind::send: return "send";
    case TraceKind::recv: return "recv";
    case TraceKind::sendrecv: return "sendrecv";
    case TraceKind::native: return name_of(static_cast<Collective>(e.sub));
    default: return nullptr;
  }
}

}  // namespace laconic
