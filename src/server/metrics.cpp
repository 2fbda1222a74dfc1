#include "server/metrics.h"

#include <cstdio>
#include <sstream>

#include "experts/cache_use.h"

namespace sy {
namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

class Writer {
 public:
  void head(const std::string& name, const char* type, const char* help) {
    os_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    os_ << name;
    if (!labels.empty()) os_ << '{' << labels << '}';
    os_ << ' ' << fmt(v) << '\n';
  }
  void metric(const std::string& name, const char* type, const char* help, double v) {
    head(name, type, help);
    sample(name, "", v);
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    head(name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cum += h.counts[i];
      sample(name + "_bucket", "le=\"" + fmt(h.bounds[i]) + "\"", static_cast<double>(cum));
    }
    cum += h.counts.back();
    sample(name + "_bucket", "le=\"+Inf\"", static_cast<double>(cum));
    sample(name + "_sum", "", h.sum);
    sample(name + "_count", "", static_cast<double>(h.count));
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

void render_expert_cache(Writer& w, const ExpertCacheInfo& c) {
  const ExpertCacheUse u = expert_cache_use({}, c.stats);
  w.head("switchyard_expert_cache_slots", "gauge", "Experts the expert cache holds (--expert-cache).");
  w.sample("switchyard_expert_cache_slots", "policy=\"" + escape(c.policy) + "\"", c.slots);
  w.head("switchyard_expert_cache_uses_total", "counter",
         "Experts the MoE layers needed, by where they were: resident (hit), brought in by a prefetch, or "
         "loaded while the layer waited (miss).");
  w.sample("switchyard_expert_cache_uses_total", "result=\"hit\"", u.hits);
  w.sample("switchyard_expert_cache_uses_total", "result=\"prefetched\"", u.prefetched);
  w.sample("switchyard_expert_cache_uses_total", "result=\"miss\"", u.misses);
  w.metric("switchyard_expert_cache_loads_total", "counter",
           "Experts read from the model file, on demand or by a prefetch.", u.loads);
  w.metric("switchyard_expert_cache_prefetches_total", "counter", "Experts a prefetch started loading.",
           u.prefetch_issued);
  w.metric("switchyard_expert_cache_read_bytes_total", "counter", "Bytes of experts read from the model file.",
           u.bytes_read);
  w.metric("switchyard_expert_cache_wait_seconds_total", "counter",
           "Seconds the forward passes waited for expert loads.", u.wait_seconds);
}

}  // namespace

void HttpMetrics::record(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  counts_[{route, status}]++;
}

std::map<std::pair<std::string, int>, uint64_t> HttpMetrics::snapshot() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::string render_metrics(const EngineStatsData& e,
                           const std::map<std::pair<std::string, int>, uint64_t>& http,
                           const ServerInfo& info, const ExpertCacheInfo* cache) {
  Writer w;
  w.head("switchyard_info", "gauge", "Served model and settings.");
  w.sample("switchyard_info",
           "model=\"" + escape(info.model_id) + "\",parallel=\"" + std::to_string(info.parallel) +
               "\",ctx_size=\"" + std::to_string(info.ctx_size) + "\",max_queue=\"" +
               std::to_string(info.max_queue) + "\"",
           1);
  w.metric("switchyard_uptime_seconds", "gauge", "Seconds since the server started.", info.uptime_seconds);
  if (info.http_threads >= 0) {
    w.metric("switchyard_http_threads", "gauge",
             "HTTP worker threads running: one per open connection, started as needed (idle ones end).",
             static_cast<double>(info.http_threads));
    w.metric("switchyard_http_threads_limit", "gauge", "The most HTTP worker threads (--http-threads).",
             static_cast<double>(info.http_threads_limit));
  }

  w.head("switchyard_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
  for (const auto& [key, n] : http) {
    w.sample("switchyard_http_requests_total",
             "route=\"" + escape(key.first) + "\",code=\"" + std::to_string(key.second) + "\"",
             static_cast<double>(n));
  }
  w.metric("switchyard_requests_submitted_total", "counter",
           "Generation requests accepted into the queue (one per choice).",
           static_cast<double>(e.requests_submitted));
  w.metric("switchyard_requests_rejected_total", "counter",
           "Generation requests refused because the queue was full (one per choice).",
           static_cast<double>(e.requests_rejected));
  w.head("switchyard_requests_finished_total", "counter", "Generation requests finished, by reason.");
  w.sample("switchyard_requests_finished_total", "reason=\"stop\"", static_cast<double>(e.finished_stop));
  w.sample("switchyard_requests_finished_total", "reason=\"length\"", static_cast<double>(e.finished_length));
  w.sample("switchyard_requests_finished_total", "reason=\"cancelled\"",
           static_cast<double>(e.finished_cancelled));
  w.sample("switchyard_requests_finished_total", "reason=\"error\"", static_cast<double>(e.finished_error));
  w.metric("switchyard_prompt_tokens_total", "counter", "Prompt tokens of accepted requests (tokens in).",
           static_cast<double>(e.prompt_tokens));
  w.metric("switchyard_generation_tokens_total", "counter", "Generated tokens (tokens out).",
           static_cast<double>(e.generated_tokens));
  w.metric("switchyard_computed_tokens_total", "counter",
           "Tokens evaluated by the model, recomputation after preemption included.",
           static_cast<double>(e.computed_tokens));
  w.metric("switchyard_steps_total", "counter", "Engine steps (forward passes over a batch).",
           static_cast<double>(e.steps));
  w.metric("switchyard_preemptions_total", "counter",
           "Sequences preempted (KV blocks freed, recomputed later) when the KV pool ran out.",
           static_cast<double>(e.preemptions));
  w.metric(
      "switchyard_prefix_reused_tokens_total", "counter",
      "Prompt tokens whose K/V were reused from an earlier request with the same prefix instead of computed.",
      static_cast<double>(e.reused_tokens));
  w.metric("switchyard_busy_seconds_total", "counter", "Seconds spent in forward passes.", e.busy_seconds);

  w.metric("switchyard_queue_depth", "gauge", "Requests waiting to join the running batch.",
           static_cast<double>(e.queue_depth));
  w.metric("switchyard_running_requests", "gauge", "Requests in the running batch.",
           static_cast<double>(e.running));
  w.metric("switchyard_batch_tokens", "gauge", "Tokens in the last step's batch.",
           static_cast<double>(e.last_batch_tokens));
  w.metric("switchyard_kv_blocks_total", "gauge", "KV cache blocks in the pool.",
           static_cast<double>(e.kv_blocks_total));
  w.metric("switchyard_kv_blocks_used", "gauge", "KV cache blocks held by running requests.",
           static_cast<double>(e.kv_blocks_used));
  w.metric("switchyard_kv_blocks_cached", "gauge",
           "KV cache blocks no request holds, kept for prefix reuse until the pool needs them.",
           static_cast<double>(e.kv_blocks_cached));
  w.metric("switchyard_kv_block_size", "gauge", "Positions per KV cache block.",
           static_cast<double>(e.kv_block_size));

  w.histogram("switchyard_time_to_first_token_seconds", "Time from arrival to the first generated token.",
              e.ttft);
  w.histogram("switchyard_time_per_output_token_seconds",
              "Time between consecutive generated tokens of a request.", e.tpot);
  w.histogram("switchyard_e2e_request_latency_seconds",
              "Time from arrival to the end of requests that completed.", e.e2e);
  w.histogram("switchyard_queue_time_seconds", "Time from arrival to joining the running batch.",
              e.queue_time);
  w.histogram("switchyard_step_batch_tokens", "Tokens per engine step.", e.batch_tokens);

  const char* moe_metrics[][3] = {
      {"switchyard_moe_routed_tokens_total", "counter", "Tokens routed through each MoE layer."},
      {"switchyard_moe_expert_activations_total", "counter",
       "Experts activated (run on at least one token) per MoE layer, summed over steps; divide by steps for "
       "the mean."},
      {"switchyard_moe_expert_bytes_read_total", "counter", "Expert weight bytes read per MoE layer."},
      {"switchyard_moe_active_experts", "gauge", "Experts activated in each MoE layer in the last step."},
  };
  for (int m = 0; m < 4; ++m) {
    w.head(moe_metrics[m][0], moe_metrics[m][1], moe_metrics[m][2]);
    for (size_t il = 0; il < e.layers.size(); ++il) {
      const MoeLayerStats& l = e.layers[il];
      if (!l.moe) continue;
      const double v = m == 0   ? static_cast<double>(l.routed_tokens)
                       : m == 1 ? static_cast<double>(l.active_experts)
                       : m == 2 ? static_cast<double>(l.expert_bytes_read)
                                : static_cast<double>(l.last_active);
      w.sample(moe_metrics[m][0], "layer=\"" + std::to_string(il) + "\"", v);
    }
  }
  if (e.n_expert > 0) {
    w.head("switchyard_moe_expert_tokens_total", "counter",
           "Tokens routed to each expert of each MoE layer (top-k choices).");
    for (size_t il = 0; il < e.layers.size(); ++il) {
      if (!e.layers[il].moe) continue;
      for (int x = 0; x < e.n_expert; ++x) {
        w.sample("switchyard_moe_expert_tokens_total",
                 "layer=\"" + std::to_string(il) + "\",expert=\"" + std::to_string(x) + "\"",
                 static_cast<double>(
                     e.expert_tokens[il * static_cast<size_t>(e.n_expert) + static_cast<size_t>(x)]));
      }
    }
  }
  if (cache) render_expert_cache(w, *cache);
  return w.str();
}

}  // namespace sy
