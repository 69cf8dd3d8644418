// delay_line: a wide-area link between two network namespaces on this machine, for the tests that
// check the simulation against a real link (scripts/netns-link --rtt, cli.delay_line,
// cli.real_link). The kernel here has no netem qdisc, so the delay is ours:
//
//   namespace A: tun device DEV_A  <-- this program -->  tun device DEV_B: namespace B
//
// It creates one TUN device (layer 3, no packet information) in each namespace, and forwards
// every packet that one side's kernel routes into its device to the other side's device after
// holding it for the one-way delay (RTT / 2), plus optional jitter, and drops a fraction (loss).
// Release stays in arrival order: a packet never overtakes an earlier one (netem's jitter
// reorders; TCP over a reordering link would measure the reordering, not the latency). The rate
// is not ours: a tbf or htb qdisc on each device's egress shapes the packets before they reach
// this program, so a packet is serialised at the link's rate, then propagates.
//
// Bounded memory: each direction holds at most --queue-packets packets (tail drop beyond, counted).
// No allocation after start-up: packets live in two preallocated rings. Timing: ppoll with a
// nanosecond timeout on the monotonic clock, so the hold is accurate to the scheduler's wake-up
// (tens of microseconds here), not to a millisecond tick.
//
// It prints "ready" on stdout once both devices exist (the caller then gives them addresses and
// routes), runs until SIGTERM or SIGINT, and then prints its counts on stderr.
//   delay_line --ns-a NS --dev-a NAME --ns-b NS --dev-b NAME --rtt-ms 40 [--jitter-ms J]
//              [--loss P] [--seed S] [--queue-packets N]
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// A slot holds one packet: the devices' MTU is 1500 (scripts/netns-link sets it) and a TUN device
// without IFF_VNET_HDR hands over no larger packet; a read that fills a slot is refused as truncated.
constexpr std::size_t kSlotBytes = 2048;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "delay_line: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// Enters namespace NAME (as `ip netns add` made it) and opens a TUN device DEV there; the device
// stays in that namespace for as long as the descriptor is open.
int open_tun_in(const std::string& ns, const std::string& dev) {
  const std::string path = "/var/run/netns/" + ns;
  const int nsfd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) fail("cannot open network namespace " + path);
  if (setns(nsfd, CLONE_NEWNET) != 0) fail("cannot enter network namespace " + ns);
  close(nsfd);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail("cannot open /dev/net/tun");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  if (dev.size() >= IFNAMSIZ) {
    std::fprintf(stderr, "delay_line: --dev name '%s' is longer than %d characters\n", dev.c_str(),
                 IFNAMSIZ - 1);
    std::exit(2);
  }
  std::memcpy(ifr.ifr_name, dev.c_str(), dev.size());
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) fail("cannot create TUN device " + dev + " in " + ns);
  return fd;
}

// One direction: packets read from `in`, written to `out` when due. A ring of fixed slots.
class Direction {
 public:
  Direction(int in, int out, std::size_t capacity) : in_(in), out_(out), due_(capacity), len_(capacity) {
    data_.resize(capacity * kSlotBytes);
  }

  // Reads what the device has; each packet is due at its arrival + hold(), never before the one
  // ahead of it.
  template <class Hold, class Lose>
  void read_all(Hold hold, Lose lose) {
    for (;;) {
      std::uint8_t* slot = full() ? scratch_.data() : &data_[tail_ * kSlotBytes];
      const ssize_t n = read(in_, slot, kSlotBytes);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        fail("read from a TUN device");
      }
      if (static_cast<std::size_t>(n) == kSlotBytes) {
        std::fprintf(stderr, "delay_line: a packet of %zu bytes or more: set the devices' MTU to 1500 at most\n", kSlotBytes);
        std::exit(2);
      }
      ++received;
      if (full()) { ++dropped_full; continue; }
      if (lose()) { ++dropped_loss; continue; }
      std::int64_t due = now_ns() + hold();
      if (count_ > 0) due = std::max(due, last_due_);
      last_due_ = due;
      due_[tail_] = due;
      len_[tail_] = static_cast<std::size_t>(n);
      tail_ = (tail_ + 1) % due_.size();
      ++count_;
    }
  }

  // Writes every packet now due; returns the time the next one is due (or -1 when empty).
  std::int64_t release(std::int64_t now) {
    while (count_ > 0 && due_[head_] <= now) {
      // EIO: the other device is down (being set up or taken down): the packet is lost, as on a
      // link whose far end is not up yet.
      if (write(out_, &data_[head_ * kSlotBytes], len_[head_]) >= 0) {
        ++forwarded;
      } else if (errno == EIO || errno == EAGAIN) {
        ++dropped_down;
      } else {
        fail("write to a TUN device");
      }
      head_ = (head_ + 1) % due_.size();
      --count_;
    }
    return count_ > 0 ? due_[head_] : -1;
  }

  std::uint64_t received = 0, forwarded = 0, dropped_full = 0, dropped_loss = 0, dropped_down = 0;

 private:
  bool full() const { return count_ == due_.size(); }
  int in_, out_;
  std::vector<std::int64_t> due_;
  std::vector<std::size_t> len_;
  std::vector<std::uint8_t> data_;
  std::array<std::uint8_t, kSlotBytes> scratch_{};
  std::size_t head_ = 0, tail_ = 0, count_ = 0;
  std::int64_t last_due_ = 0;
};

struct Options {
  std::string ns_a, ns_b, dev_a, dev_b;
  double rtt_ms = 0, jitter_ms = 0, loss = 0;
  std::uint64_t seed = 1;
  std::size_t queue_packets = 4096;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--ns-a", o.ns_a, "namespace of side A (ip netns name)")->required();
  app.add_option("--dev-a", o.dev_a, "TUN device to create in A")->required();
  app.add_option("--ns-b", o.ns_b, "namespace of side B")->required();
  app.add_option("--dev-b", o.dev_b, "TUN device to create in B")->required();
  app.add_option("--rtt-ms", o.rtt_ms, "round-trip time added by the link (each way RTT/2)")->required()
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--jitter-ms", o.jitter_ms, "each packet's one-way hold varies uniformly by +-J ms (no reordering)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--loss", o.loss, "fraction of packets dropped, each way")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.seed, "seed of the jitter and loss draws");
  app.add_option("--queue-packets", o.queue_packets, "packets held per direction at most (tail drop beyond)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 16));
}

// The link's draws: each packet's one-way hold and whether it is lost (one generator for both,
// in the order the packets arrive).
class Link {
 public:
  explicit Link(const Options& o)
      : rng_(o.seed), one_way_ns_(static_cast<std::int64_t>(o.rtt_ms * 0.5e6)),
        jitter_ns_(static_cast<std::int64_t>(o.jitter_ms * 1e6)), loss_(o.loss) {}
  std::int64_t hold() {
    return jitter_ns_ == 0 ? one_way_ns_
                           : one_way_ns_ + static_cast<std::int64_t>((2 * unit_(rng_) - 1) * static_cast<double>(jitter_ns_));
  }
  bool lose() { return loss_ > 0 && unit_(rng_) < loss_; }

 private:
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::int64_t one_way_ns_, jitter_ns_;
  double loss_;
};

// Releases what is due in both directions; returns the time the next packet is due (-1: none).
std::int64_t release_due(Direction& ab, Direction& ba) {
  const std::int64_t now = now_ns();
  const std::int64_t next_ab = ab.release(now), next_ba = ba.release(now);
  std::int64_t next = -1;
  for (std::int64_t t : {next_ab, next_ba}) {
    if (t >= 0 && (next < 0 || t < next)) next = t;
  }
  return next;
}

// Forwards between devices a and b until a signal, or until a device goes away.
void forward(int a, int b, Direction& ab, Direction& ba, Link& link) {
  auto hold = [&] { return link.hold(); };
  auto lose = [&] { return link.lose(); };
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (!g_stop) {
    const std::int64_t next = release_due(ab, ba);
    timespec timeout{};
    if (next >= 0) {
      const std::int64_t wait = std::max<std::int64_t>(0, next - now_ns());
      timeout.tv_sec = wait / 1000000000;
      timeout.tv_nsec = wait % 1000000000;
    }
    const int r = ppoll(fds, 2, next >= 0 ? &timeout : nullptr, nullptr);
    if (r < 0 && errno != EINTR) fail("ppoll");
    if (r <= 0) continue;
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL) || fds[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      std::fprintf(stderr, "delay_line: a TUN device went away\n");
      return;
    }
    if (fds[0].revents & POLLIN) ab.read_all(hold, lose);
    if (fds[1].revents & POLLIN) ba.read_all(hold, lose);
  }
}

void print_counts(const std::string& from, const std::string& to, const Direction& d) {
  std::fprintf(stderr, "delay_line: %s -> %s: %llu packets forwarded, dropped %llu (full queue) %llu (loss) %llu (device down)\n",
               from.c_str(), to.c_str(), static_cast<unsigned long long>(d.forwarded),
               static_cast<unsigned long long>(d.dropped_full), static_cast<unsigned long long>(d.dropped_loss),
               static_cast<unsigned long long>(d.dropped_down));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"delay_line: a link with latency between two network namespaces (TUN devices)"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  if (o.jitter_ms > o.rtt_ms / 2) {
    std::fprintf(stderr, "delay_line: --jitter-ms %g exceeds the one-way delay %g ms (a hold cannot be negative)\n",
                 o.jitter_ms, o.rtt_ms / 2);
    return 2;
  }

  const int a = open_tun_in(o.ns_a, o.dev_a);
  const int b = open_tun_in(o.ns_b, o.dev_b);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGHUP, on_signal);

  Link link(o);
  Direction ab(a, b, o.queue_packets), ba(b, a, o.queue_packets);
  std::printf("ready\n");
  std::fflush(stdout);
  forward(a, b, ab, ba, link);
  print_counts(o.ns_a, o.ns_b, ab);
  print_counts(o.ns_b, o.ns_a, ba);
  return 0;
}
