#include "base/job_profile.h"

#include <algorithm>
#include <string_view>

namespace sy {

JobProfile::JobProfile(int threads) : busy_ns_(static_cast<size_t>(std::max(1, threads))) {}

void JobProfile::begin_window() {
  last_end_ = Clock::now();
  in_window_ = true;
}

JobProfile::JobStart JobProfile::job_started(const void* key, const char* pretty) {
  JobStart s{Clock::now(), std::vector<int64_t>(busy_ns_.size()), site_index(key, pretty)};
  for (size_t t = 0; t < busy_ns_.size(); ++t) s.busy_ns[t] = busy_ns_[t].load(std::memory_order_relaxed);
  if (in_window_) raw_[s.site].sum.serial_before_s += std::chrono::duration<double>(s.t - last_end_).count();
  return s;
}

void JobProfile::job_ended(int64_t tasks, const JobStart& start) {
  last_end_ = Clock::now();
  Site& s = raw_[start.site].sum;
  s.jobs += 1;
  s.tasks += tasks;
  s.wall_s += std::chrono::duration<double>(last_end_ - start.t).count();
  for (size_t t = 0; t < busy_ns_.size(); ++t) {
    // The pool has seen every task end (acquire) before it calls this, so the workers'
    // additions are visible.
    s.busy_s[t] += 1e-9 * static_cast<double>(busy_ns_[t].load(std::memory_order_relaxed) - start.busy_ns[t]);
  }
}

size_t JobProfile::site_index(const void* key, const char* pretty) {
  for (size_t i = 0; i < raw_.size(); ++i) {
    if (raw_[i].key == key) return i;
  }
  raw_.push_back({key, pretty, {}});
  raw_.back().sum.busy_s.assign(busy_ns_.size(), 0.0);
  return raw_.size() - 1;
}

std::vector<JobProfile::Site> JobProfile::sites() const {
  std::vector<Site> out;
  for (const Raw& r : raw_) {
    Site s = r.sum;
    s.name = job_site_name(r.pretty);
    // Two call sites in one function get the same name: number the later ones.
    int same = 0;
    for (const Site& o : out) same += o.name == s.name || o.name.rfind(s.name + " #", 0) == 0;
    if (same > 0) s.name += " #" + std::to_string(same + 1);
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const Site& a, const Site& b) { return a.wall_s > b.wall_s; });
  return out;
}

std::string job_site_name(const char* pretty_function) {
  std::string s = pretty_function;
  const size_t f = s.find("F = ");
  if (f == std::string::npos) return s;
  s = s.substr(f + 4);
  // Cut at the lambda's closure ("::<lambda"), else at the end of F's type.
  size_t end = s.find("::<lambda");
  if (end == std::string::npos) end = s.find_first_of(";]");
  s = s.substr(0, end);
  for (const std::string_view ns : {"(anonymous namespace)::", "{anonymous}::", "sy::cpu::", "sy::"}) {
    for (size_t at; (at = s.find(ns)) != std::string::npos;) s.erase(at, ns.size());
  }
  // The function's parameters.
  if (const size_t p = s.find('('); p != std::string::npos && p > 0) s = s.substr(0, p);
  // A return type before the name ("void Forward::run"): keep the last word.
  if (const size_t sp = s.rfind(' '); sp != std::string::npos) s = s.substr(sp + 1);
  return s;
}

}  // namespace sy
