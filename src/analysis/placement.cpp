#include "analysis/placement.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace sy {

const char* placement_name(PlacementMethod m) {
  switch (m) {
    case PlacementMethod::Contiguous:
      return "contiguous";
    case PlacementMethod::Greedy:
      return "greedy";
    case PlacementMethod::AntiCorrelation:
      return "anti-correlation";
  }
  return "?";
}

namespace {

int slots_per_device(int n_expert, int n_dev) {
  return (n_expert + n_dev - 1) / n_dev;
}

std::vector<double> mean_load(const Trace& t, int l, int64_t begin, int64_t end) {
  std::vector<double> m(t.info.n_expert, 0.0);
  for (int64_t s = begin; s < end; ++s) {
    const uint32_t* c = t.step_layer(s, l);
    for (int e = 0; e < t.info.n_expert; ++e) m[e] += c[e];
  }
  for (double& v : m) v /= double(std::max<int64_t>(1, end - begin));
  return m;
}

std::vector<int> greedy(const std::vector<double>& load, int n_dev) {
  const int E = static_cast<int>(load.size()), slots = slots_per_device(E, n_dev);
  std::vector<int> order(E), dev(E, -1), used(n_dev, 0);
  std::vector<double> dev_load(n_dev, 0.0);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
  for (int e : order) {
    int best = -1;
    for (int d = 0; d < n_dev; ++d) {
      if (used[d] < slots && (best < 0 || dev_load[d] < dev_load[best])) best = d;
    }
    dev[e] = best;
    ++used[best];
    dev_load[best] += load[e];
  }
  return dev;
}

// Second moments M[i][j] = mean over steps of n_i * n_j: sum_d E[load_d^2] is the sum of
// M over pairs sharing a device, so co-active experts on one device cost more.
std::vector<double> second_moments(const Trace& t, int l, int64_t begin, int64_t end) {
  const int E = t.info.n_expert;
  std::vector<double> m(size_t(E) * E, 0.0);
  for (int64_t s = begin; s < end; ++s) {
    const uint32_t* c = t.step_layer(s, l);
    for (int i = 0; i < E; ++i) {
      if (c[i] == 0) continue;
      for (int j = 0; j < E; ++j) m[size_t(i) * E + j] += double(c[i]) * c[j];
    }
  }
  for (double& v : m) v /= double(std::max<int64_t>(1, end - begin));
  return m;
}

std::vector<int> anti_correlated(const Trace& t, int l, int n_dev, int64_t begin, int64_t end) {
  const int E = t.info.n_expert;
  const auto M = second_moments(t, l, begin, end);
  std::vector<int> dev = greedy(mean_load(t, l, begin, end), n_dev);
  // cross[e][d] = sum of M[e][j] over experts j on device d (j != e).
  auto cost_with = [&](int e, int d, int skip) {
    double c = 0;
    for (int j = 0; j < E; ++j) {
      if (j != e && j != skip && dev[j] == d) c += M[size_t(e) * E + j];
    }
    return c;
  };
  // Swapping a (on da) with b (on db) changes sum_d E[load_d^2] by
  // 2 * (cost(a, db) + cost(b, da) - cost(a, da) - cost(b, db)), b and a excluded.
  for (int pass = 0; pass < 100; ++pass) {
    bool improved = false;
    for (int a = 0; a < E; ++a) {
      for (int b = a + 1; b < E; ++b) {
        const int da = dev[a], db = dev[b];
        if (da == db) continue;
        const double delta =
            cost_with(a, db, b) + cost_with(b, da, a) - cost_with(a, da, b) - cost_with(b, db, a);
        if (delta < -1e-9) {
          std::swap(dev[a], dev[b]);
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  return dev;
}

}  // namespace

std::vector<int> place_experts(const Trace& t, int moe_layer, int n_dev, PlacementMethod m, int64_t begin,
                               int64_t end) {
  const int E = t.info.n_expert;
  if (n_dev < 1) throw Error("placement: the device count must be at least 1");
  switch (m) {
    case PlacementMethod::Contiguous: {
      std::vector<int> dev(E);
      for (int e = 0; e < E; ++e) dev[e] = e / slots_per_device(E, n_dev);
      return dev;
    }
    case PlacementMethod::Greedy:
      return greedy(mean_load(t, moe_layer, begin, end), n_dev);
    case PlacementMethod::AntiCorrelation:
      return anti_correlated(t, moe_layer, n_dev, begin, end);
  }
  return {};
}

LoadMetrics placement_load(const Trace& t, int moe_layer, const std::vector<int>& device, int n_dev,
                           int64_t begin, int64_t end) {
  LoadMetrics r;
  std::vector<double> step_load(n_dev), sum_load(n_dev, 0.0);
  double total = 0;
  for (int64_t s = begin; s < end; ++s) {
    std::fill(step_load.begin(), step_load.end(), 0.0);
    const uint32_t* c = t.step_layer(s, moe_layer);
    for (int e = 0; e < t.info.n_expert; ++e) step_load[device[e]] += c[e];
    r.avg_max_load += *std::max_element(step_load.begin(), step_load.end());
    for (int d = 0; d < n_dev; ++d) {
      sum_load[d] += step_load[d];
      total += step_load[d];
    }
  }
  const double n = double(std::max<int64_t>(1, end - begin));
  r.avg_max_load /= n;
  r.max_load = *std::max_element(sum_load.begin(), sum_load.end()) / n;
  r.ideal = total / n / n_dev;
  return r;
}

std::vector<PlacementResult> placement_study(const Trace& t, int n_dev) {
  const int64_t S = t.n_steps(), half = S / 2;
  if (half < 1)
    throw Error(
        "placement: the trace needs at least 2 steps (fit on the first half, evaluate on the second)");
  std::vector<PlacementResult> out;
  for (PlacementMethod m : kPlacementMethods) {
    PlacementResult r;
    r.method = m;
    r.n_dev = n_dev;
    const int L = t.info.n_moe();
    for (int l = 0; l < L; ++l) {
      r.device.push_back(place_experts(t, l, n_dev, m, 0, half));
      const LoadMetrics f = placement_load(t, l, r.device.back(), n_dev, 0, half);
      const LoadMetrics h = placement_load(t, l, r.device.back(), n_dev, half, S);
      r.fit.max_load += f.max_load / L;
      r.fit.avg_max_load += f.avg_max_load / L;
      r.fit.ideal += f.ideal / L;
      r.held_out.max_load += h.max_load / L;
      r.held_out.avg_max_load += h.avg_max_load / L;
      r.held_out.ideal += h.ideal / L;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace sy
