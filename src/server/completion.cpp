#include "server/completion.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/ascii.h"
#include "base/json_text.h"
#include "base/mix64.h"
#include "base/utf8.h"

namespace sy {

using json = nlohmann::json;

namespace {

std::string sse(const json& j) {
  return "data: " + json_text(j) + "\n\n";
}

int64_t utf8_chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char b : s) n += (b & 0xC0) != 0x80;
  return n;
}

json byte_values(const std::string& s) {
  json a = json::array();
  for (unsigned char b : s) a.push_back(static_cast<int>(b));
  return a;
}

// A token as the legacy completions API names it: its text, or, for a piece that is not
// whole UTF-8 (a byte-fallback token, part of a character), "bytes:" and its bytes as \xNN,
// as OpenAI writes such tokens. As U+FFFD they would all be one key of top_logprobs.
std::string legacy_token(const std::string& piece) {
  if (is_valid_utf8(piece)) return piece;
  std::string out = "bytes:";
  for (const char ch : piece) append_hex_escape(out, static_cast<unsigned char>(ch), false);
  return out;
}

// The n choices of one request draw with different seeds, reproducible from its seed. The
// first is the request's own seed (n = 1 gives the same text as choice 0 of n = 4); the
// others are hashed from it, so that they do not repeat another seed's draws (seed + i
// made choice 1 of seed 1 the text of seed 2).
uint64_t choice_seed(uint64_t seed, int i) {
  return i == 0 ? seed : mix64(seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
}

}  // namespace

CompletionRun::CompletionRun(Engine& engine, const Tokenizer& tok, CompletionJob job, Meta meta)
    : engine_(engine),
      tok_(tok),
      job_(std::move(job)),
      meta_(std::move(meta)),
      channel_(std::make_shared<Channel>()) {
  for (size_t p = 0; p < job_.prompts.size(); ++p) {
    for (int i = 0; i < job_.n; ++i) {
      auto c = std::make_unique<Choice>(tok_, job_.stop);
      c->index = static_cast<int>(p * job_.n + i);
      c->prompt = p;
      if (!job_.echo_text[p].empty()) c->text = job_.echo_text[p];
      c->text_chars = utf8_chars(c->text);
      GenerationParams g = job_.gen;
      g.max_tokens = job_.max_tokens[p];
      g.sampling.seed = choice_seed(g.sampling.seed, i);
      if (g.max_tokens > 0 || g.prompt_logprobs)
        c->req = std::make_shared<Request>(job_.prompts[p], std::move(g), channel_);
      else
        c->finish = "length";
      choices_.push_back(std::move(c));
    }
  }
}

CompletionRun::~CompletionRun() {
  cancel();
}

void CompletionRun::cancel() {
  for (auto& c : choices_) {
    if (c->req) c->req->cancel();
  }
}

Engine::Submit CompletionRun::submit() {
  std::vector<std::shared_ptr<Request>> reqs;
  for (auto& c : choices_) {
    if (c->req) reqs.push_back(c->req);
  }
  if (reqs.empty()) return Engine::Submit::Ok;
  return engine_.submit(reqs);
}

bool CompletionRun::done() const {
  for (const auto& c : choices_) {
    if (c->finish.empty()) return false;
  }
  return true;
}

const CompletionRun::Choice* CompletionRun::failed() const {
  for (const auto& c : choices_) {
    if (c->finish == "error") return c.get();
  }
  return nullptr;
}

void CompletionRun::pump() {
  for (auto& cp : choices_) {
    Choice& c = *cp;
    if (!c.finish.empty() || !c.req) continue;
    buf_.clear();
    const size_t logprobs_before = c.logprobs.size();
    const Request::Update u = c.req->poll(c.seen, buf_, wants_logprobs() ? &c.logprobs : nullptr);
    c.seen = u.n_tokens;
    size_t used = 0;
    for (int32_t t : buf_) {
      c.got_token = true;
      c.n_tokens++;
      used++;
      const std::string added = c.dec.push(t);
      if (wants_logprobs()) {
        c.offsets.push_back(c.text_chars);
        c.text_chars += utf8_chars(added);
      }
      c.text += c.stop.push(added);
      if (c.stop.stopped()) {
        c.finish = "stop";
        // The engine drops it at its next step, or had already counted it as a length.
        if (c.req->stop()) engine_.recount_length_as_stop();
        break;
      }
    }
    // Tokens after a stop string are not part of the answer, nor are their log-probabilities.
    if (c.logprobs.size() > logprobs_before + used) c.logprobs.resize(logprobs_before + used);
    if (c.offsets.size() > c.logprobs.size()) c.offsets.resize(c.logprobs.size());
    if (job_.gen.prompt_logprobs && !c.prompt_scored && (u.n_tokens > 0 || u.finish != FinishReason::None))
      add_prompt_logprobs(c);
    if (!c.finish.empty() || u.finish == FinishReason::None) continue;
    // Finished, and poll() returned every token it produced.
    c.text += c.stop.push(c.dec.flush());
    c.text += c.stop.flush();
    switch (u.finish) {
      case FinishReason::Stop:
        c.finish = "stop";
        break;
      case FinishReason::Length:
        c.finish = "length";
        break;
      case FinishReason::Cancelled:
        c.finish = "error";
        c.error = "the request was cancelled because the server is shutting down";
        break;
      default:
        c.finish = "error";
        c.error = u.error.empty() ? "the engine failed" : u.error;
    }
  }
}

bool CompletionRun::wait(const ResponseSink& sink, uint64_t& version) {
  version = channel_->wait(version, std::chrono::milliseconds(100));
  if (sink.alive && !sink.alive()) {
    cancel();
    return false;
  }
  return true;
}

json CompletionRun::usage() const {
  int64_t completion = 0;
  for (const auto& c : choices_) completion += c->n_tokens;
  const int64_t prompt = job_.prompt_tokens();
  // The prompt is counted once for the n choices, so are its cached tokens: the first
  // choice's (the others usually attach the prompt that the first one computed). With
  // max_tokens 0 and nothing to score, no choice ran a request, and nothing was cached.
  int64_t cached = 0;
  for (const auto& c : choices_) {
    if (c->req) {
      cached = c->req->cached_prompt_tokens();
      break;
    }
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

void CompletionRun::add_prompt_logprobs(Choice& c) const {
  c.prompt_scored = true;
  const std::vector<int32_t>& prompt = c.req->prompt();
  std::vector<GeneratedLogprob> all;
  all.push_back({prompt[0], std::numeric_limits<float>::quiet_NaN(), {}});
  for (GeneratedLogprob& g : c.req->prompt_logprobs()) all.push_back(std::move(g));
  all.insert(all.end(), c.logprobs.begin(), c.logprobs.end());
  c.logprobs = std::move(all);
  // Where each prompt token starts in the echoed text: from decoding each prefix, shifted by
  // what the echo differs in at its start (a string prompt is echoed as given; decoding
  // after BOS keeps SPM's leading space).
  const int64_t shift = utf8_chars(tok_.decode(prompt)) - utf8_chars(job_.echo_text[c.prompt]);
  std::vector<int64_t> offsets;
  std::vector<int32_t> prefix;
  for (int32_t t : prompt) {
    offsets.push_back(std::max<int64_t>(0, utf8_chars(tok_.decode(prefix)) - shift));
    prefix.push_back(t);
  }
  offsets.insert(offsets.end(), c.offsets.begin(), c.offsets.end());
  c.offsets = std::move(offsets);
}

json CompletionRun::take_logprobs(Choice& c) const {
  const bool chat = job_.endpoint == Endpoint::Chat;
  json content = json::array(), tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (; c.logprobs_sent < c.logprobs.size(); ++c.logprobs_sent) {
    const GeneratedLogprob& g = c.logprobs[c.logprobs_sent];
    const std::string piece = tok_.token_to_piece(g.token);
    if (chat) {
      json alternatives = json::array();
      for (const auto& [id, lp] : g.top) {
        const std::string p = tok_.token_to_piece(id);
        alternatives.push_back({{"token", p}, {"logprob", lp}, {"bytes", byte_values(p)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", g.logprob}, {"bytes", byte_values(piece)}, {"top_logprobs", alternatives}});
    } else {
      // The legacy API always lists the chosen token too: up to logprobs + 1 entries.
      json alternatives = json::object();
      for (const auto& [id, lp] : g.top) alternatives.emplace(legacy_token(tok_.token_to_piece(id)), lp);
      alternatives.emplace(legacy_token(piece), g.logprob);
      const bool first_of_prompt = std::isnan(g.logprob);  // nothing before it to score it
      tokens.push_back(legacy_token(piece));
      token_logprobs.push_back(first_of_prompt ? json(nullptr) : json(g.logprob));
      top.push_back(first_of_prompt ? json(nullptr) : alternatives);
      offsets.push_back(c.offsets[c.logprobs_sent]);
    }
  }
  if (chat) return {{"content", content}, {"refusal", nullptr}};
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json CompletionRun::chunk(const Choice& c, const std::string& text, bool finish, json logprobs) const {
  json choice;
  if (job_.endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (!finish) {
      if (!c.started) delta = {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}};
      else delta["content"] = text;
    }
    choice = {{"index", c.index},
              {"delta", delta},
              {"logprobs", logprobs},
              {"finish_reason", finish ? json(c.finish) : json(nullptr)}};
  } else {
    choice = {{"text", text},
              {"index", c.index},
              {"logprobs", logprobs},
              {"finish_reason", finish ? json(c.finish) : json(nullptr)}};
  }
  json j = {{"id", meta_.id},
            {"object", job_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta_.created},
            {"model", meta_.model},
            {"system_fingerprint", meta_.fingerprint},
            {"choices", json::array({choice})}};
  if (job_.include_usage) j["usage"] = nullptr;
  return j;
}

bool CompletionRun::stream(const ResponseSink& sink) {
  const bool chat = job_.endpoint == Endpoint::Chat;
  // OpenAI's first chunk of a chat choice: the role alone, no text or log-probabilities (the
  // SDKs' stream helpers build a choice from its first chunk and then append that chunk's
  // log-probabilities again). False: the client went away.
  const auto open_choice = [&](Choice& c) {
    if (!chat || c.started) return true;
    const bool written = sink.write(sse(chunk(c, "", false)));  // while !started: the role chunk
    c.started = true;
    return written;
  };
  uint64_t version = 0;
  for (;;) {
    pump();
    for (auto& cp : choices_) {
      Choice& c = *cp;
      // A chunk per batch of new text, and one at the first token even when its text is
      // still empty (a partial UTF-8 character), so clients can time the first token.
      // With log-probabilities, also a chunk for tokens whose text is still held back.
      const bool new_logprobs = wants_logprobs() && c.logprobs_sent < c.logprobs.size();
      if (!c.text.empty() || (c.got_token && !c.started) || new_logprobs) {
        if (!open_choice(c)) return cancel(), false;
        if (!chat || !c.text.empty() || new_logprobs) {
          json lp = wants_logprobs() ? take_logprobs(c) : json(nullptr);
          if (!sink.write(sse(chunk(c, c.text, false, std::move(lp))))) return cancel(), false;
        }
        c.started = true;
        c.text.clear();
      }
      if (c.finish == "error") {
        sink.write(sse(error_json(c.error, "server_error", "", "")));
        cancel();
        return true;
      }
      if (!c.finish.empty() && !c.finish_sent) {
        if (!open_choice(c)) return cancel(), false;  // the role chunk comes first, always
        if (!sink.write(sse(chunk(c, "", true)))) return cancel(), false;
        c.finish_sent = true;
      }
    }
    if (done()) break;
    if (!wait(sink, version)) return false;
  }
  if (job_.include_usage) {
    json u = {{"id", meta_.id},
              {"object", job_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta_.created},
              {"model", meta_.model},
              {"system_fingerprint", meta_.fingerprint},
              {"choices", json::array()},
              {"usage", usage()}};
    if (!sink.write(sse(u))) return false;
  }
  return sink.write("data: [DONE]\n\n");
}

bool CompletionRun::respond(const ResponseSink& sink) {
  uint64_t version = 0;
  for (;;) {
    pump();
    if (done()) break;
    if (!wait(sink, version)) return false;
  }
  // The 200 went out when the reply started (server.cpp keeps watching the connection while
  // the engine works). A failure now (an engine error, a cancel at shutdown) still sends its
  // error, then returns false: the reply ends without its last chunk, so that clients see a
  // broken transfer instead of a successful completion that holds no choices.
  if (const Choice* f = failed()) {
    sink.write(json_text(error_json(f->error, "server_error", "", "")));
    return false;
  }
  json choices = json::array();
  for (const auto& c : choices_) {
    json lp = wants_logprobs() ? take_logprobs(*c) : json(nullptr);
    if (job_.endpoint == Endpoint::Chat) {
      choices.push_back({{"index", c->index},
                         {"message", {{"role", "assistant"}, {"content", c->text}, {"refusal", nullptr}}},
                         {"logprobs", std::move(lp)},
                         {"finish_reason", c->finish}});
    } else {
      choices.push_back(
          {{"text", c->text}, {"index", c->index}, {"logprobs", std::move(lp)}, {"finish_reason", c->finish}});
    }
  }
  json j = {{"id", meta_.id},
            {"object", job_.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
            {"created", meta_.created},
            {"model", meta_.model},
            {"system_fingerprint", meta_.fingerprint},
            {"choices", choices},
            {"usage", usage()}};
  return sink.write(json_text(j));
}

}  // namespace sy
