#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/sampler.h"

#include <limits>
#include <set>

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
