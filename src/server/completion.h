// One API call in flight: its choices (prompts x n) submitted to the engine as requests,
// their tokens turned into text (streaming detokenization, stop strings) and written out
// as OpenAI server-sent events or one JSON response. Runs on the HTTP handler thread and
// talks to the engine only through Request.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/openai.h"
#include "server/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace sy {

// Where the response goes: write() returns false when the client is gone; alive() checks
// the connection while nothing is being written.
struct ResponseSink {
  std::function<bool(const std::string&)> write;
  std::function<bool()> alive;
};

class CompletionRun {
 public:
  struct Meta {
    std::string id;
    int64_t created = 0;
    std::string model;
    std::string fingerprint;
  };

  CompletionRun(Engine& engine, const Tokenizer& tok, CompletionJob job, Meta meta);
  ~CompletionRun();  // cancels whatever is still running
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  Engine::Submit submit();
  // Server-sent events until the end ("data: [DONE]"); false when the client went away
  // (its requests are cancelled then).
  bool stream(const ResponseSink& sink);
  // Waits for every choice, then writes the JSON response; false when the client went away
  // or a choice failed (its error is written, and the reply must end unfinished).
  bool respond(const ResponseSink& sink);
  void cancel();

 private:
  struct Choice {
    Choice(const Tokenizer& tok, std::vector<std::string> stops) : dec(tok), stop(std::move(stops)) {}
    int index = 0;
    size_t prompt = 0;
    std::shared_ptr<Request> req;  // null when nothing is to be generated (max_tokens 0)
    StreamDecoder dec;
    StopMatcher stop;
    size_t seen = 0;
    int64_t n_tokens = 0;
    std::string text;    // stream: not yet sent; otherwise: everything
    // Every token's log-probabilities, when the job asks for them: the prompt's first (with
    // echo; the first prompt token has none, a NaN), then the generated tokens'.
    std::vector<GeneratedLogprob> logprobs;
    std::vector<int64_t> offsets;  // where each of those tokens starts in the text, in characters
    size_t logprobs_sent = 0;
    bool prompt_scored = false;  // the prompt's entries are in `logprobs`
    int64_t text_chars = 0;      // characters of text before the next generated token
    std::string finish;  // "stop" / "length" when done; "error" with `error`
    std::string error;
    bool got_token = false, started = false, finish_sent = false;
  };

  bool done() const;
  void pump();  // moves new tokens of every choice into its text
  bool wait(const ResponseSink& sink, uint64_t& version);
  bool wants_logprobs() const { return job_.gen.top_logprobs >= 0; }
  // Puts the prompt's log-probabilities in front of the choice's (once, when they are complete).
  void add_prompt_logprobs(Choice& c) const;
  // The "logprobs" object of the choice's tokens not yet sent, in the endpoint's format.
  nlohmann::json take_logprobs(Choice& c) const;
  nlohmann::json chunk(const Choice& c, const std::string& text, bool finish,
                       nlohmann::json logprobs = nullptr) const;
  nlohmann::json usage() const;
  const Choice* failed() const;

  Engine& engine_;
  const Tokenizer& tok_;
  CompletionJob job_;
  Meta meta_;
  std::shared_ptr<Channel> channel_;
  std::vector<std::unique_ptr<Choice>> choices_;
  std::vector<int32_t> buf_;
};

}  // namespace sy
