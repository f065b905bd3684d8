#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace eq::metrics {
namespace {

[[noreturn]] void die(const std::string& what) {
  // Registration runs at start-up, before any thread: a plain stderr line
  // is enough and keeps this module free of the logger.
  std::fprintf(stderr, "metrics: %s\n", what.c_str());
  std::abort();
}

void renderSeries(std::string& out, const std::string& name,
                  const std::vector<std::string>& label_names, const LabelValues& values,
                  const char* extra_name, const std::string& extra_value, double v) {
  out += name;
  if (!label_names.empty() || extra_name != nullptr) {
    out += '{';
    bool first = true;
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (!first) out += ',';
      first = false;
      out += label_names[i];
      out += "=\"";
      out += escapeLabelValue(values[i]);
      out += '"';
    }
    if (extra_name != nullptr) {
      if (!first) out += ',';
      out += extra_name;
      out += "=\"";
      out += extra_value;
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += formatValue(v);
  out += '\n';
}

const char* typeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Counts are the common case: print them as integers (exact up to 2^53).
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

std::string escapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

bool validMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool validLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;  // "__" is reserved
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void Counter::inc(double by) {
  if (!(by >= 0)) return;  // also refuses NaN
  value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  // First bucket whose upper bound is >= v ("le" is inclusive).
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  s.cumulative.reserve(counts_.size());
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

template <typename Cell>
Family<Cell>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                     Type type, std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      type_(type),
      bounds_(std::move(bounds)) {}

template <typename Cell>
Cell& Family<Cell>::with(const LabelValues& values) {
  if (values.size() != label_names_.size()) {
    die(name_ + ": " + std::to_string(values.size()) + " label values for " +
        std::to_string(label_names_.size()) + " labels");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cells_.find(values);
  if (it == cells_.end()) {
    std::unique_ptr<Cell> cell;
    if constexpr (std::is_same_v<Cell, Histogram>) {
      cell = std::make_unique<Histogram>(bounds_);
    } else {
      cell = std::make_unique<Cell>();
    }
    it = cells_.emplace(values, std::move(cell)).first;
  }
  return *it->second;
}

template <typename Cell>
void Family<Cell>::render(std::string& out) const {
  out += "# HELP " + name_ + " " + escapeHelp(help_) + "\n";
  out += "# TYPE " + name_ + " " + typeName(type_) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, cell] : cells_) {
    if constexpr (std::is_same_v<Cell, Histogram>) {
      Histogram::Snapshot s = cell->snapshot();
      const std::string bucket = name_ + "_bucket";
      for (size_t i = 0; i < bounds_.size(); ++i) {
        renderSeries(out, bucket, label_names_, values, "le", formatValue(bounds_[i]),
                     static_cast<double>(s.cumulative[i]));
      }
      renderSeries(out, bucket, label_names_, values, "le", "+Inf",
                   static_cast<double>(s.cumulative.back()));
      renderSeries(out, name_ + "_sum", label_names_, values, nullptr, "", s.sum);
      renderSeries(out, name_ + "_count", label_names_, values, nullptr, "",
                   static_cast<double>(s.count));
    } else {
      renderSeries(out, name_, label_names_, values, nullptr, "", cell->value());
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::claimName(const std::string& name, const std::vector<std::string>& label_names,
                         bool histogram) {
  if (!validMetricName(name)) die("invalid metric name '" + name + "'");
  for (const std::string& l : label_names) {
    if (!validLabelName(l)) die(name + ": invalid label name '" + l + "'");
    if (histogram && l == "le") die(name + ": a histogram cannot have a label 'le'");
  }
  auto taken = [&](const std::string& n) {
    for (const auto& f : counters_) {
      if (f->name_ == n) return true;
    }
    for (const auto& f : gauges_) {
      if (f->name_ == n) return true;
    }
    for (const auto& f : histograms_) {
      if (f->name_ == n || f->name_ + "_bucket" == n || f->name_ + "_sum" == n ||
          f->name_ + "_count" == n) {
        return true;
      }
    }
    return false;
  };
  if (taken(name) ||
      (histogram && (taken(name + "_bucket") || taken(name + "_sum") || taken(name + "_count")))) {
    die("metric '" + name + "' registered twice");
  }
}

Family<Counter>& Registry::counter(std::string name, std::string help,
                                   std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  claimName(name, label_names, false);
  counters_.emplace_back(new Family<Counter>(std::move(name), std::move(help),
                                             std::move(label_names), Type::kCounter));
  Family<Counter>* f = counters_.back().get();
  order_.push_back({f, nullptr, nullptr});
  // An unlabelled series exists from the start (value 0), so rate() and
  // increase() see it before the first event.
  if (f->label_names_.empty()) f->with({});
  return *f;
}

Family<Gauge>& Registry::gauge(std::string name, std::string help,
                               std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  claimName(name, label_names, false);
  gauges_.emplace_back(
      new Family<Gauge>(std::move(name), std::move(help), std::move(label_names), Type::kGauge));
  Family<Gauge>* f = gauges_.back().get();
  order_.push_back({nullptr, f, nullptr});
  if (f->label_names_.empty()) f->with({});
  return *f;
}

Family<Histogram>& Registry::histogram(std::string name, std::string help,
                                       std::vector<std::string> label_names,
                                       std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  claimName(name, label_names, true);
  if (bounds.empty()) die(name + ": a histogram needs at least one bucket");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      die(name + ": bucket bounds must be finite and strictly increasing");
    }
  }
  histograms_.emplace_back(new Family<Histogram>(std::move(name), std::move(help),
                                                 std::move(label_names), Type::kHistogram,
                                                 std::move(bounds)));
  Family<Histogram>* f = histograms_.back().get();
  order_.push_back({nullptr, nullptr, f});
  if (f->label_names_.empty()) f->with({});
  return *f;
}

std::string Registry::render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : order_) {
    if (e.counter != nullptr) e.counter->render(out);
    if (e.gauge != nullptr) e.gauge->render(out);
    if (e.histogram != nullptr) e.histogram->render(out);
  }
  return out;
}

}  // namespace eq::metrics
