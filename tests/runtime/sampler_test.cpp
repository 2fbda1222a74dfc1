#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace sy {
namespace {

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  const float l[] = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l, 4), 1);
  EXPECT_EQ(argmax(l, 4), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler s(p);
  const float l[] = {0.1f, 0.2f, 3.0f, 0.3f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(l, 4), 2);
}

TEST(Sampler, SeedMakesDrawsReproducible) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = 0.05f * i;
  Sampler a(p), b(p);
  std::vector<int32_t> da, db;
  for (int i = 0; i < 100; ++i) {
    da.push_back(a.sample(l.data(), 50));
    db.push_back(b.sample(l.data(), 50));
  }
  EXPECT_EQ(da, db);
  // With a flat-ish distribution, 100 draws are not all the same token.
  EXPECT_GT(std::set<int32_t>(da.begin(), da.end()).size(), 10u);
}

TEST(Sampler, TopPAndMinPCut) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.top_p = 0.5f;  // the top token alone has probability > 0.5
  Sampler s(p);
  const float l[] = {5.0f, 1.0f, 1.0f, 1.0f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l, 4), 0);
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // others are e^-4 of the top
  Sampler m(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(m.sample(l, 4), 0);
}

// The tokens llama.cpp's cut-offs keep, from a full sort: top-k, then the smallest prefix
// whose probability (temperature 1) reaches top_p, then those at least min_p as likely as
// the top one.
std::set<int32_t> kept_by_full_sort(const std::vector<float>& l, int top_k, float top_p, float min_p) {
  std::vector<int32_t> ids(l.size());
  for (size_t i = 0; i < l.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  size_t n = top_k > 0 ? std::min<size_t>(ids.size(), top_k) : ids.size();
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(l[ids[i]] - l[ids[0]]);
  if (top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cum += std::exp(l[ids[i]] - l[ids[0]]) / sum;
      if (cum >= top_p) {
        n = i + 1;
        break;
      }
    }
  }
  size_t keep = 1;
  while (keep < n && std::exp(l[ids[keep]] - l[ids[0]]) >= min_p) ++keep;
  if (min_p > 0.0f) n = keep;
  return std::set<int32_t>(ids.begin(), ids.begin() + n);
}

TEST(Sampler, CutOffsKeepWhatAFullSortKeeps) {
  // 200 logits with ties (steps of 0.05), so the cut-offs meet equal logits too.
  std::mt19937 rng(3);
  std::vector<float> l(200);
  for (auto& v : l) v = 0.05f * static_cast<float>(rng() % 120);
  for (int top_k : {0, 5, 60}) {
    for (float top_p : {1.0f, 0.3f, 0.9f}) {
      for (float min_p : {0.0f, 0.05f, 0.5f}) {
        const std::set<int32_t> want = kept_by_full_sort(l, top_k, top_p, min_p);
        SamplingParams p;
        p.temperature = 1000.0f;  // near-uniform over what survives: every kept token shows up
        p.top_k = top_k;
        p.top_p = top_p;
        p.min_p = min_p;
        Sampler s(p);
        std::set<int32_t> got;
        for (int i = 0; i < 4000; ++i) got.insert(s.sample(l.data(), static_cast<int64_t>(l.size())));
        EXPECT_EQ(got, want) << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p;
      }
    }
  }
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 0.25f};
  for (float t : {1.0f, 0.5f}) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    std::vector<int> count(l.size(), 0);
    constexpr int kDraws = 40000;
    for (int i = 0; i < kDraws; ++i) count[s.sample(l.data(), static_cast<int64_t>(l.size()))]++;
    double z = 0.0;
    for (float v : l) z += std::exp(v / t);
    for (size_t i = 0; i < l.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(count[i]) / kDraws, std::exp(l[i] / t) / z, 0.01) << "token " << i << " at " << t;
    }
  }
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  s.accept(0);
  const float l[] = {2.0f, 1.5f};
  EXPECT_EQ(s.sample(l, 2), 1);  // 2.0 / 2 = 1.0 < 1.5
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_THROW(p.validate(), Error);
  p.top_p = 0.9f;
  p.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  // NaN fails every comparison, so each range check must refuse it too (and inf where it
  // has no meaning); each message names its flag.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto refused = [](SamplingParams q, const std::string& flag) {
    try {
      q.validate();
      ADD_FAILURE() << flag << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  SamplingParams ok;
  ok.validate();
  SamplingParams q = ok;
  q.top_p = nan;
  refused(q, "--top-p");
  q = ok;
  q.min_p = nan;
  refused(q, "--min-p");
  q = ok;
  q.repeat_penalty = nan;
  refused(q, "--repeat-penalty");
  q.repeat_penalty = inf;
  refused(q, "--repeat-penalty");
  q = ok;
  q.temperature = nan;
  refused(q, "--temp");
}

}  // namespace
}  // namespace sy
