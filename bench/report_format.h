// How hilo_bench writes numbers in its Markdown tables.
//
//   Thousands(1234567);   // "1,234,567"
//   Duration(1500);       // "1.5 µs"
//   RateCell({98, 100, 102});  // "100 ±2%"
#ifndef HILO_BENCH_REPORT_FORMAT_H_
#define HILO_BENCH_REPORT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hilo::bench {

// With a comma between each group of three digits.
std::string Thousands(int64_t n);
// ns, µs, ms or s, whichever reads best.
std::string Duration(int64_t nanos);
// B, KiB or MiB.
std::string Bytes(double bytes);
// Two decimals.
std::string Ratio(double r);
// 0 for none.
double Median(std::vector<double> v);
// "12,345 ±2%": the median, and half the spread of the runs around it.
std::string RateCell(const std::vector<double>& runs);

}  // namespace hilo::bench

#endif  // HILO_BENCH_REPORT_FORMAT_H_
