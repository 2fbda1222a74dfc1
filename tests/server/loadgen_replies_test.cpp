// What loadgen reads from a server it does not control: events, error bodies and model
// lists of every shape give a result or a named error, never a JSON library exception.
#include "server/loadgen_replies.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sy {
namespace {

TEST(LoadgenReplies, StreamEvents) {
  EXPECT_TRUE(parse_stream_event("[DONE]").done);

  const StreamEvent text = parse_stream_event(R"({"choices":[{"index":0,"text":" the"}]})");
  EXPECT_TRUE(text.error.empty());
  EXPECT_TRUE(text.has_choice);
  EXPECT_FALSE(text.completion_tokens);

  const StreamEvent usage =
      parse_stream_event(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":64}})");
  EXPECT_FALSE(usage.has_choice);
  EXPECT_EQ(usage.completion_tokens, 64);
  EXPECT_EQ(usage.prompt_tokens, 12);

  EXPECT_EQ(text.text, " the");
  EXPECT_EQ(parse_stream_event(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})").text, "Hi");
  const StreamEvent cached = parse_stream_event(
      R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":8,)"
      R"("prompt_tokens_details":{"cached_tokens":32}}})");
  EXPECT_EQ(cached.cached_tokens, 32);
  EXPECT_FALSE(usage.cached_tokens);

  EXPECT_EQ(parse_stream_event(R"({"error":{"message":"overloaded"}})").error, "overloaded");
  EXPECT_EQ(parse_stream_event(R"({"error":"plain text"})").error, "plain text");
  EXPECT_EQ(parse_stream_event(R"({"error":{"code":5}})").error, "error event");
  EXPECT_NE(parse_stream_event("not json").error.find("not a JSON object: not json"), std::string::npos);
  EXPECT_NE(parse_stream_event("[1,2]").error.find("not a JSON object"), std::string::npos);

  // Fields of unexpected types are ignored, not thrown on.
  const StreamEvent odd =
      parse_stream_event(R"({"choices":{"0":1},"usage":{"completion_tokens":"64","prompt_tokens":-1e30}})");
  EXPECT_TRUE(odd.error.empty());
  EXPECT_FALSE(odd.has_choice);
  EXPECT_FALSE(odd.completion_tokens);
  EXPECT_FALSE(odd.prompt_tokens);
  EXPECT_FALSE(parse_stream_event(R"({"usage":"none"})").completion_tokens);
}

TEST(LoadgenReplies, TokenizeReplies) {
  EXPECT_EQ(parse_tokenize_reply(R"({"tokens":[1,20,300],"count":3})"), (std::vector<int32_t>{1, 20, 300}));
  EXPECT_TRUE(parse_tokenize_reply(R"({"tokens":[]})").empty());
  for (const char* bad : {"<html>", R"({"ids":[1]})", R"({"tokens":[{"id":1,"piece":"a"}]})", R"({"tokens":[-1]})",
                          R"({"tokens":[1e12]})"}) {
    EXPECT_THROW(parse_tokenize_reply(bad), Error) << bad;
  }
}

TEST(LoadgenReplies, ErrorBodies) {
  EXPECT_EQ(error_message_of(R"({"error":{"message":"max_tokens must be at least 1"}})"),
            "max_tokens must be at least 1");
  EXPECT_EQ(error_message_of(R"({"error":"busy"})"), "busy");
  EXPECT_EQ(error_message_of("<html>Bad Gateway</html>"), "<html>Bad Gateway</html>");
  EXPECT_EQ(error_message_of(R"({"detail":[1]})"), R"({"detail":[1]})");
}

TEST(LoadgenReplies, ModelLists) {
  const std::string list =
      R"({"data":[{"id":"a","meta":{"n_vocab":50304}},{"id":"b"},{"id":"c","meta":{"n_vocab":"many"}}]})";
  ServedModel m = parse_models_reply(list, "", 32000);
  EXPECT_EQ(m.id, "a");
  EXPECT_EQ(m.n_vocab, 50304);
  m = parse_models_reply(list, "b", 32000);
  EXPECT_EQ(m.id, "b");
  EXPECT_EQ(m.n_vocab, 32000);                                            // no meta: the default
  EXPECT_EQ(parse_models_reply(list, "c", 32000).n_vocab, 32000);         // not a number: the default
  EXPECT_EQ(parse_models_reply(list, "unlisted", 32000).id, "unlisted");  // the server may still take it
  // Entries without a usable id are skipped.
  EXPECT_EQ(parse_models_reply(R"({"data":[5,{"id":7},{"id":"x"}]})", "", 1).id, "x");
  for (const std::string bad :
       {"", "null", "[]", R"({"data":[]})", R"({"data":"a"})", R"({"data":[{"id":3}]})"}) {
    try {
      parse_models_reply(bad, "", 32000);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/v1/models returned no model"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sy
