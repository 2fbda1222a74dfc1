// How a request's end is counted when the client's stop string and the engine's token limit
// meet on its last token: exactly one of settle_finish() and stop() sees the other, so the
// request is counted once, as the stop the client's answer reports.
#include "runtime/request.h"

#include <gtest/gtest.h>

namespace sy {
namespace {

Request make_request() { return Request({1, 2, 3}, GenerationParams{}); }

TEST(RequestFinish, AStopBeforeTheEngineSettlesMakesItAStop) {
  Request r = make_request();
  EXPECT_FALSE(r.stop()) << "nothing counted yet: nothing to recount";
  EXPECT_EQ(r.settle_finish(FinishReason::Length), FinishReason::Stop);
}

TEST(RequestFinish, AStopAfterTheEngineCountedALengthAsksForARecount) {
  Request r = make_request();
  EXPECT_EQ(r.settle_finish(FinishReason::Length), FinishReason::Length);
  EXPECT_TRUE(r.stop());
}

TEST(RequestFinish, OnlyALengthIsEverRecounted) {
  Request stopped = make_request();
  EXPECT_EQ(stopped.settle_finish(FinishReason::Stop), FinishReason::Stop);  // an EOS
  EXPECT_FALSE(stopped.stop());
  Request cancelled = make_request();
  cancelled.cancel();  // a hang-up first: it stays a cancellation
  EXPECT_EQ(cancelled.settle_finish(FinishReason::Length), FinishReason::Length);
  EXPECT_FALSE(cancelled.stop());
}

}  // namespace
}  // namespace sy
