// Human units for link descriptions in recipes and tools: "100 Gbit/s", "450GB/s", "5 us",
// "30ms". One parser for every place that reads them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace laconic {

// Bytes per second from "<number> <unit>", unit one of bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s
// (decimal, 8 bits per byte; also bps/kbps/Mbps/Gbps) or B/s, KB/s, MB/s, GB/s, TB/s (decimal),
// KiB/s, MiB/s, GiB/s (binary). Returns nullopt when the text is not a positive bandwidth.
std::optional<double> parse_bandwidth(std::string_view text);
// Seconds from "<number> <unit>", unit one of ns, us (or µs), ms, s, min, or number-unit pairs
// added up with units h, m (or min) and s: "3h50m", "1h 30min", "2m30s". Non-negative.
std::optional<double> parse_duration(std::string_view text);

// Canonical spellings that parse back to the same value ("12.5 GB/s" style is not used: links are
// quoted in bits, as vendors do): e.g. "100 Gbit/s", "1.5 Mbit/s"; "5 us", "30 ms", "2 s".
std::string format_bandwidth(double bytes_per_s);
std::string format_duration(double seconds);

// Byte counts for people (logs, reports): decimal units, 3 significant digits or so: "2.35 MB",
// "651.4 KB", "12 B" (B, KB, MB, GB, TB, PB).
std::string format_bytes(double bytes);

}  // namespace laconic
