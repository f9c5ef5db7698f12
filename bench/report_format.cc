#include "bench/report_format.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo::bench {

std::string Thousands(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

std::string Duration(int64_t nanos) {
  if (nanos < 1000) return absl::StrCat(nanos, " ns");
  if (nanos < 1000000) return absl::StrFormat("%.1f µs", nanos / 1e3);
  if (nanos < 1000000000) return absl::StrFormat("%.2f ms", nanos / 1e6);
  return absl::StrFormat("%.2f s", nanos / 1e9);
}

std::string Bytes(double bytes) {
  if (bytes < 1024) return absl::StrFormat("%.0f B", bytes);
  if (bytes < 1024 * 1024) return absl::StrFormat("%.1f KiB", bytes / 1024);
  return absl::StrFormat("%.1f MiB", bytes / (1024 * 1024));
}

std::string Ratio(double r) { return absl::StrFormat("%.2f", r); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string RateCell(const std::vector<double>& runs) {
  const double median = Median(runs);
  std::string cell = Thousands(static_cast<int64_t>(median + 0.5));
  if (runs.size() > 1 && median > 0) {
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
    cell += absl::StrFormat(" ±%.0f%%", 50.0 * (*hi - *lo) / median);
  }
  return cell;
}

}  // namespace hilo::bench
