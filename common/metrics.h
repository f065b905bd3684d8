// Metrics: a registry of counters, gauges and histograms with labels, rendered
// in the Prometheus text exposition format (version 0.0.4).
//
// A process builds one Registry in main() (per-process state, STYLE.md habit
// 8), registers its families at start-up and hands references to the objects
// that count. Families and the cells they hand out live as long as the
// Registry, so a reference to a cell may be kept and used from any thread:
// counters and gauges are atomics, histograms take a short lock of their own.
// render() may run on another thread (common/metrics_server.h) at the same
// time; it sees each cell consistently (a histogram's +Inf bucket always
// equals its _count), not a snapshot of the whole registry.
//
// Registration errors (bad names, a family registered twice, a label count
// that does not match) are programming errors found at start-up: they abort
// with a message instead of returning a Status.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace eq::metrics {

using LabelValues = std::vector<std::string>;

class Counter {
 public:
  // Negative or NaN increments are ignored: a counter only goes up.
  void inc(double by = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: upper bounds of the buckets, finite and strictly increasing
  // (checked by the registry); +Inf is implied.
  explicit Histogram(const std::vector<double>& bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double>& bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class Type { kCounter, kGauge, kHistogram };

// One metric name with its help text, label names and one cell per set of
// label values.
template <typename Cell>
class Family {
 public:
  // The cell for these label values (as many as the family has label
  // names), created at zero on first use.
  Cell& with(const LabelValues& values);
  // The family's only cell when it has no labels.
  Cell& get() { return with({}); }

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names, Type type,
         std::vector<double> bounds = {});
  void render(std::string& out) const;

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  Type type_;
  std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<Cell>> cells_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Family<Counter>& counter(std::string name, std::string help,
                           std::vector<std::string> label_names = {});
  Family<Gauge>& gauge(std::string name, std::string help,
                       std::vector<std::string> label_names = {});
  Family<Histogram>& histogram(std::string name, std::string help,
                               std::vector<std::string> label_names, std::vector<double> bounds);

  // Every family in registration order, each series in label order.
  std::string render() const;

 private:
  void claimName(const std::string& name, const std::vector<std::string>& label_names,
                 bool histogram);

  mutable std::mutex mu_;
  // Exactly one of the three pointers of an entry is set; order is kept so
  // the output reads in the order the process registered its metrics.
  struct Entry {
    Family<Counter>* counter = nullptr;
    Family<Gauge>* gauge = nullptr;
    Family<Histogram>* histogram = nullptr;
  };
  std::vector<Entry> order_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
};

// Exposition helpers, exposed for tests.
// A sample value or bucket bound: integers without a fraction, others in the
// shortest form that reads back exactly, and NaN, +Inf, -Inf.
std::string formatValue(double v);
// A label value inside double quotes: backslash, double quote and newline
// escaped.
std::string escapeLabelValue(std::string_view v);
// A HELP text: backslash and newline escaped.
std::string escapeHelp(std::string_view v);
bool validMetricName(std::string_view name);
bool validLabelName(std::string_view name);

}  // namespace eq::metrics
