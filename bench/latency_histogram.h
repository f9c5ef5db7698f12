// LatencyHistogram: a fixed-size log-linear histogram of durations in
// nanoseconds, for percentiles of millions of samples without storing them.
//
//   hilo::bench::LatencyHistogram h;
//   h.Record(1234);
//   int64_t p99 = h.Percentile(0.99);
//
// Values below 64 ns are exact; above, each power of two is split into 32
// buckets, so a reported percentile is within about 3% of the true sample.
// Count, sum and maximum are exact.
//
// Not thread-safe: give each thread its own and Merge them afterwards.
#ifndef HILO_BENCH_LATENCY_HISTOGRAM_H_
#define HILO_BENCH_LATENCY_HISTOGRAM_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace hilo::bench {

class LatencyHistogram {
 public:
  // Records one sample; negative values count as 0.
  void Record(int64_t nanos) {
    const uint64_t v = nanos < 0 ? 0 : static_cast<uint64_t>(nanos);
    ++buckets_[Index(v)];
    ++count_;
    sum_ += v;
    max_ = std::max(max_, v);
  }

  void Merge(const LatencyHistogram& other) {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      buckets_[i] += other.buckets_[i];
    }
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
  }

  int64_t count() const { return static_cast<int64_t>(count_); }
  int64_t max() const { return static_cast<int64_t>(max_); }
  double mean() const {
    return count_ == 0 ? 0 : static_cast<double>(sum_) / count_;
  }

  // The sample at quantile q in [0, 1] (the midpoint of its bucket, capped
  // at the exact maximum); 0 when empty.
  int64_t Percentile(double q) const {
    if (count_ == 0) return 0;
    const uint64_t rank = std::min<uint64_t>(
        count_ - 1, static_cast<uint64_t>(q * static_cast<double>(count_)));
    uint64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen > rank) {
        const uint64_t mid = (Lower(i) + Upper(i)) / 2;
        return static_cast<int64_t>(std::min(mid, max_));
      }
    }
    return static_cast<int64_t>(max_);
  }

 private:
  static constexpr int kSubBits = 5;  // 32 buckets per power of two
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;

  static size_t Index(uint64_t v) {
    if (v < (uint64_t{2} << kSubBits)) return static_cast<size_t>(v);
    const int msb = 63 - std::countl_zero(v);
    const int shift = msb - kSubBits;
    return (static_cast<size_t>(shift) << kSubBits) +
           static_cast<size_t>(v >> shift);
  }
  static uint64_t Lower(size_t i) {
    if (i < (size_t{2} << kSubBits)) return i;
    const int shift = static_cast<int>(i >> kSubBits) - 1;
    const uint64_t mantissa = (i & ((1u << kSubBits) - 1)) | (1u << kSubBits);
    return mantissa << shift;
  }
  static uint64_t Upper(size_t i) {
    if (i < (size_t{2} << kSubBits)) return i;
    const int shift = static_cast<int>(i >> kSubBits) - 1;
    return Lower(i) + (uint64_t{1} << shift) - 1;
  }

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace hilo::bench

#endif  // HILO_BENCH_LATENCY_HISTOGRAM_H_
