#include "server/openai.h"

#include <cmath>
#include <optional>
#include <random>

#include "server/json_fields.h"

namespace sy {

using json = nlohmann::json;

namespace {

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw invalid_type("stop", "a string or an array of strings", *v);
  if (v->size() > 4)
    throw invalid_value("stop",
                        "at most 4 stop sequences are allowed, but got " + std::to_string(v->size()) + ".");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) throw invalid_type("stop[" + std::to_string(i) + "]", "a string", (*v)[i]);
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

void parse_sampling(const json& body, GenerationParams& g, const ApiContext& ctx) {
  SamplingParams& s = g.sampling;
  // OpenAI's defaults: temperature 1, nucleus off; the extensions (top_k, min_p,
  // repeat_penalty as in llama.cpp and vLLM) are off unless given.
  s.temperature = static_cast<float>(get_number(body, "temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(get_number(body, "top_p", 0, 1).value_or(1.0));
  s.top_k = static_cast<int>(get_int(body, "top_k", 0, 1 << 30).value_or(0));
  if (s.top_p <= 0.0f) {  // top_p 0 keeps only the most likely token
    s.top_p = 1.0f;
    s.top_k = 1;
  }
  s.min_p = static_cast<float>(get_number(body, "min_p", 0, 1).value_or(0.0));
  s.repeat_penalty = static_cast<float>(get_number(body, "repeat_penalty", 0.01, 100).value_or(1.0));
  s.repeat_last_n = static_cast<int>(get_int(body, "repeat_last_n", 0, 1 << 20).value_or(64));
  // No seed (or null) draws a fresh one per request; so does -1, llama.cpp's "random seed".
  const std::optional<int64_t> seed = get_int(body, "seed", INT64_MIN, INT64_MAX);
  s.seed = seed && *seed != -1 ? static_cast<uint64_t>(*seed) : ctx.default_seed;
  g.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", -2, 2).value_or(0.0));
  g.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", -2, 2).value_or(0.0));
  g.ignore_eos = get_bool(body, "ignore_eos").value_or(false);

  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw invalid_type("logit_bias", "an object", *lb);
    const int32_t n_vocab = ctx.tok->n_vocab();
    for (const auto& [key, val] : lb->items()) {
      const std::string f = "logit_bias[" + key + "]";
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id >= n_vocab) {
        throw invalid_value("logit_bias", "'" + key + "' is not a token id of this model (0.." +
                                              std::to_string(n_vocab - 1) + ").");
      }
      if (!val.is_number()) throw invalid_type(f, "a number", val);
      const double b = val.get<double>();
      if (!(b >= -100 && b <= 100))
        throw invalid_value(f, "expected a number between -100 and 100, but got " + format_number(b) + ".");
      g.logit_bias.emplace_back(static_cast<int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b));
    }
  }
}


void parse_prompts(const json& body, const ApiContext& ctx, bool echo, CompletionJob& job) {
  const json* p = field(body, "prompt");
  if (!p)
    throw ApiError(400, "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter");
  const Tokenizer& tok = *ctx.tok;
  auto add_text = [&](const std::string& text) {
    std::vector<int32_t> ids = tok.encode(text, tok.add_bos_default(), true, tok.add_eos_default());
    // An empty prompt starts a new document, as OpenAI's does (after <|endoftext|>): with the
    // BOS even where the vocabulary adds none, or the EOS of one that has no BOS.
    if (ids.empty() && (tok.bos_id() >= 0 || tok.eos_id() >= 0))
      ids.push_back(tok.bos_id() >= 0 ? tok.bos_id() : tok.eos_id());
    job.prompts.push_back(std::move(ids));
    job.echo_text.push_back(echo ? text : std::string());
  };
  auto add_tokens = [&](std::vector<int32_t> ids) {
    // Echoed as the text that encodes to these tokens: the same echo as the string prompt
    // they came from. Decoding after a BOS (as llama.cpp's detokenize does) would keep the
    // space SPM adds in front of the first word.
    const bool after_bos = !ids.empty() && ids[0] == tok.bos_id();
    job.echo_text.push_back(echo ? tok.decode({ids.begin() + (after_bos ? 1 : 0), ids.end()}) : std::string());
    job.prompts.push_back(std::move(ids));
  };
  if (p->is_string()) {
    add_text(p->get<std::string>());
  } else if (p->is_array()) {
    if (p->empty()) throw invalid_value("prompt", "the prompt array is empty.");
    const json& first = (*p)[0];
    if (first.is_string()) {
      for (size_t i = 0; i < p->size(); ++i) {
        if (!(*p)[i].is_string())
          throw invalid_type("prompt[" + std::to_string(i) + "]", "a string", (*p)[i]);
        add_text((*p)[i].get<std::string>());
      }
    } else if (first.is_array()) {
      for (size_t i = 0; i < p->size(); ++i) {
        const std::string f = "prompt[" + std::to_string(i) + "]";
        if (!(*p)[i].is_array()) throw invalid_type(f, "an array of token ids", (*p)[i]);
        add_tokens(token_array((*p)[i], f, tok.n_vocab()));
      }
    } else {
      add_tokens(token_array(*p, "prompt", tok.n_vocab()));
    }
  } else {
    throw invalid_type("prompt", "a string, an array of strings or an array of token ids", *p);
  }
}

void parse_chat(const json& body, const ApiContext& ctx, CompletionJob& job) {
  const json* m = field(body, "messages");
  if (!m)
    throw ApiError(400, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter");
  if (!m->is_array()) throw invalid_type("messages", "an array", *m);
  if (m->empty())
    throw invalid_value("messages", "expected an array with at least 1 message, but got an empty array.");
  const auto messages = parse_chat_messages(*m);
  if (!ctx.chat->supported()) {
    // 400 as vLLM answers a model without a template: a 5xx would have clients (the OpenAI
    // SDKs among them) retry a request that can never succeed on this server.
    throw ApiError(
        400,
        "This model's chat template is not supported by switchyard, so /v1/chat/completions is unavailable; "
        "use /v1/completions, or restart the server with --chat-template one of: " +
            ChatTemplate::supported_names() + " (or --chat-template-file with a template of one of them).",
        "", "chat_template_unsupported");
  }
  // vLLM's and Hugging Face's flag: false leaves the assistant header off (a prompt that
  // ends in the conversation's last turn). Other template arguments are not taken.
  const bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  if (const json* k = field(body, "chat_template_kwargs"); k && !(k->is_object() && k->empty()))
    throw unsupported("chat_template_kwargs", "Template arguments ('chat_template_kwargs')");
  std::string text;
  try {
    text = ctx.chat->render(messages, add_generation_prompt);
  } catch (const Error& e) {
    throw ApiError(400, std::string("The messages do not fit this model's chat template: ") + e.what() + ".",
                   "messages", "invalid_value");
  }
  const Tokenizer& tok = *ctx.tok;
  // Templates that write bos_token themselves must not get a second one.
  const int32_t bos = tok.bos_id();
  const bool has_bos = bos >= 0 && !tok.token_text(bos).empty() && text.rfind(tok.token_text(bos), 0) == 0;
  job.prompts.push_back(tok.encode(text, tok.add_bos_default() && !has_bos, true, tok.add_eos_default()));
  job.echo_text.emplace_back();
  for (const auto& s : ctx.chat->stop_strings()) job.stop.push_back(s);
}

// A field present with a value that asks for something: not 0, "", {}, [] or false.
bool asks_for_something(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return false;
  if (v->is_string()) return !v->get<std::string>().empty();
  if (v->is_object() || v->is_array()) return !v->empty();
  if (v->is_number()) return v->get<double>() != 0;
  return !v->is_boolean() || v->get<bool>();
}

// Features this server does not have are refused, not silently ignored.
void refuse_missing_features(const json& body, bool chat, int n) {
  if (const json* t = field(body, "tools"); t && !(t->is_array() && t->empty()))
    throw unsupported("tools", "Tool calling ('tools')");
  if (const json* f = field(body, "functions"); f && !(f->is_array() && f->empty()))
    throw unsupported("functions", "Function calling ('functions')");
  // A tool choice that asks for a tool call, audio output, web search: each would change
  // what the client expects back. "none" and "auto" ask for nothing a text reply breaks.
  for (const char* key : {"tool_choice", "function_call"}) {
    const json* tc = field(body, key);
    if (tc && !(tc->is_string() && (tc->get<std::string>() == "none" || tc->get<std::string>() == "auto")))
      throw unsupported(key, std::string("A '") + key + "' that requires a tool call");
  }
  if (field(body, "audio")) throw unsupported("audio", "Audio output ('audio')");
  if (const json* mo = field(body, "modalities")) {
    if (!mo->is_array()) throw invalid_type("modalities", "an array of strings", *mo);
    for (const json& x : *mo)
      if (!(x.is_string() && x.get<std::string>() == "text"))
        throw unsupported("modalities", "Output modalities other than text");
  }
  if (field(body, "web_search_options")) throw unsupported("web_search_options", "Web search ('web_search_options')");
  // Other servers' fields that constrain or shape the output (llama.cpp's, vLLM's): a
  // client that sends them relies on them, so they are refused by name, not ignored.
  // Values that ask for nothing (0, "", {}, [], false) are taken.
  for (const char* key : {"grammar", "json_schema", "guided_json", "guided_regex", "guided_choice", "guided_grammar"})
    if (asks_for_something(body, key)) throw unsupported(key, std::string("Constrained decoding ('") + key + "')");
  if (field(body, "n_predict")) throw unsupported("n_predict", "'n_predict' (llama.cpp's name; send max_tokens)");
  if (asks_for_something(body, "n_probs"))
    throw unsupported("n_probs", std::string("'n_probs' (llama.cpp's name; send ") +
                                     (chat ? "logprobs and top_logprobs)" : "logprobs)"));
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object()) throw invalid_type("response_format", "an object", *rf);
    const json* type = field(*rf, "type");
    if (type && !(type->is_string() && type->get<std::string>() == "text")) {
      throw unsupported("response_format.type", "Structured output ('response_format' other than text)");
    }
  }
  if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty())) {
    throw unsupported("suffix", "Insertion ('suffix')");
  }
  if (auto bo = get_int(body, "best_of", 1, 128); bo && *bo != 1 && *bo != n) {
    throw unsupported("best_of", "'best_of' other than 1 or n");
  }
}

}  // namespace

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json ApiError::body() const {
  return error_json(what(), type, param, code);
}

int64_t CompletionJob::prompt_tokens() const {
  int64_t n = 0;
  for (const auto& p : prompts) n += static_cast<int64_t>(p.size());
  return n;
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() & 15];
  return s;
}

json parse_json_body(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    throw ApiError(400,
                   "We could not parse the JSON body of your request. The body must be valid JSON "
                   "(see https://platform.openai.com/docs/api-reference).",
                   "", "invalid_json");
  }
  if (!j.is_object())
    throw ApiError(400, "The request body must be a JSON object, but got " + type_of(j) + ".", "",
                   "invalid_json");
  return j;
}

std::vector<ChatMessage> parse_chat_messages(const json& messages) {
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string f = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw invalid_type(f, "an object", m);
    const json* role = field(m, "role");
    if (!role)
      throw ApiError(400, "Missing required parameter: '" + f + ".role'.", f + ".role",
                     "missing_required_parameter");
    if (!role->is_string()) throw invalid_type(f + ".role", "a string", *role);
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r == "tool" || r == "function") throw unsupported(f + ".role", "The '" + r + "' role (tool calling)");
    if (r != "system" && r != "user" && r != "assistant") {
      throw invalid_value(f + ".role",
                          "'" + r + "' is not one of 'system', 'developer', 'user', 'assistant'.");
    }
    if (field(m, "tool_calls") || field(m, "function_call"))
      throw unsupported(f + ".tool_calls", "Tool calling");
    std::string content;
    const json* c = field(m, "content");
    if (!c) {
      if (r != "assistant")
        throw ApiError(400, "Missing required parameter: '" + f + ".content'.", f + ".content",
                       "missing_required_parameter");
    } else if (c->is_string()) {
      content = c->get<std::string>();
    } else if (c->is_array()) {
      for (size_t j = 0; j < c->size(); ++j) {
        const json& part = (*c)[j];
        const std::string pf = f + ".content[" + std::to_string(j) + "]";
        if (!part.is_object()) throw invalid_type(pf, "an object", part);
        const json* type = field(part, "type");
        if (!type || !type->is_string())
          throw ApiError(400, "Missing required parameter: '" + pf + ".type'.", pf + ".type",
                         "missing_required_parameter");
        if (type->get<std::string>() != "text")
          throw unsupported(pf + ".type", "Content of type '" + type->get<std::string>() + "'");
        const json* text = field(part, "text");
        if (!text || !text->is_string()) throw invalid_type(pf + ".text", "a string", text ? *text : json());
        // Parts joined by a newline, as llama.cpp and vLLM join them for a template that
        // takes a string: "Hello" and "world" do not run together into "Helloworld".
        if (j > 0) content += '\n';
        content += text->get<std::string>();
      }
    } else {
      throw invalid_type(f + ".content", "a string or an array of content parts", *c);
    }
    out.push_back({r, std::move(content)});
  }
  return out;
}

// Log-probabilities into g.top_logprobs (-1: none, else alternatives per token) and
// g.prompt_logprobs. Completions: "logprobs": 0..5 alternatives per token, with "echo" for
// the prompt's tokens too. Chat: "logprobs": true with "top_logprobs": 0..20.
void parse_logprobs(const json& body, bool chat, GenerationParams& g) {
  if (!chat) {
    if (field(body, "top_logprobs"))
      throw ApiError(400, "'top_logprobs' is a chat parameter; completions take 'logprobs' (0 to 5).",
                     "top_logprobs", "invalid_value");
    const auto n = get_int(body, "logprobs", 0, 5);
    g.top_logprobs = n ? static_cast<int>(*n) : -1;
    g.prompt_logprobs = n && get_bool(body, "echo").value_or(false);
    return;
  }
  const bool on = get_bool(body, "logprobs").value_or(false);
  const auto top = get_int(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (top && !on)
    throw invalid_value("top_logprobs", "'top_logprobs' is only allowed when 'logprobs' is true.");
  g.top_logprobs = on ? static_cast<int>(top.value_or(0)) : -1;
}

CompletionJob parse_completion_request(const json& body, Endpoint ep, const ApiContext& ctx) {
  CompletionJob job;
  job.endpoint = ep;
  check_model(body, ctx.model_id, /*required=*/true);
  const bool chat = ep == Endpoint::Chat;
  job.n = static_cast<int>(get_int(body, "n", 1, 128).value_or(1));
  job.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!job.stream)
      throw ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                     "stream_options", "invalid_value");
    if (!so->is_object()) throw invalid_type("stream_options", "an object", *so);
    job.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  parse_sampling(body, job.gen, ctx);
  job.stop = parse_stop(body);

  parse_logprobs(body, chat, job.gen);
  refuse_missing_features(body, chat, job.n);
  if (const json* u = field(body, "user"); u && !u->is_string()) throw invalid_type("user", "a string", *u);

  bool echo = false;
  if (chat) {
    parse_chat(body, ctx, job);
  } else {
    echo = get_bool(body, "echo").value_or(false);
    parse_prompts(body, ctx, echo, job);
  }
  if (job.prompts.size() * static_cast<size_t>(job.n) > ctx.max_choices) {
    throw invalid_value("n", "this request asks for " + std::to_string(job.prompts.size() * job.n) +
                                 " completions, but the server takes at most " +
                                 std::to_string(ctx.max_choices) + " at once.");
  }

  // Lengths against the context size.
  const char* mt_key = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const auto max_tokens = get_int(body, mt_key, 0, INT32_MAX);
  const char* prompt_key = chat ? "messages" : "prompt";
  for (const auto& p : job.prompts) {
    const int64_t np = static_cast<int64_t>(p.size());
    if (np == 0) throw invalid_value(prompt_key, "the prompt is empty (it has no tokens).");
    // A prompt may fill the whole context when max_tokens asks for nothing after it (scoring a
    // window of the context's size, as evaluation harnesses do); more is refused below.
    if (np > ctx.ctx_size || (np == ctx.ctx_size && !max_tokens)) {
      throw ApiError(400,
                     "This model's maximum context length is " + std::to_string(ctx.ctx_size) +
                         " tokens, however your " + (chat ? "messages" : "prompt") + " resulted in " +
                         std::to_string(np) + " tokens. Please reduce the length of the " +
                         (chat ? "messages." : "prompt."),
                     prompt_key, "context_length_exceeded");
    }
    int64_t m = max_tokens.value_or(chat ? ctx.ctx_size - np : std::min<int64_t>(16, ctx.ctx_size - np));
    if (max_tokens && np + m > ctx.ctx_size) {
      throw ApiError(400,
                     "This model's maximum context length is " + std::to_string(ctx.ctx_size) +
                         " tokens. However, you requested " + std::to_string(np + m) + " tokens (" +
                         std::to_string(np) + " in the " + (chat ? "messages" : "prompt") + ", " +
                         std::to_string(m) + " in the completion). Please reduce the length of the " +
                         (chat ? "messages" : "prompt") + " or '" + mt_key + "'.",
                     mt_key, "context_length_exceeded");
    }
    job.max_tokens.push_back(m);
  }
  return job;
}

}  // namespace sy
