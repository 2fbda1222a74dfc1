#include "tokenizer/spm.h"

#include <algorithm>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace sy {

namespace {

struct Symbol {
  int prev, next;
  size_t off, n;  // n == 0 once merged into its left neighbour
};

struct Bigram {
  int left, right;
  float score;
  size_t size;  // bytes of left + right when queued; detects stale entries
};

// Highest score first, then leftmost: the order of llama.cpp's std::priority_queue.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& v, const std::string& text) : v_(v), text_(text) {}

  void run(std::vector<int32_t>& out) {
    for (size_t off = 0; off < text_.size();) {
      const size_t n = std::min(unicode::utf8_len(text_[off]), text_.size() - off);
      const int idx = static_cast<int>(symbols_.size());
      symbols_.push_back({idx - 1, off + n == text_.size() ? -1 : idx + 1, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[b.left];
      Symbol& r = symbols_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  std::string_view piece(const Symbol& s) const {
    return std::string_view(text_).substr(s.off, s.n);
  }

  void try_add(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view t =
        std::string_view(text_).substr(symbols_[left].off, symbols_[left].n + symbols_[right].n);
    const int32_t id = v_.find(t);
    if (id < 0) return;
    queue_.push({left, right, v_.score[id], t.size()});
    // Last writer wins, as in llama.cpp: resegment() follows the latest pair for a text.
    rev_merge_[std::string(t)] = {left, right};
  }

  void resegment(const Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view t = piece(s);
    const int32_t id = v_.find(t);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge_.find(std::string(t));
    if (it == rev_merge_.end()) {
      for (char c : t) out.push_back(spm_byte_token(v_, static_cast<uint8_t>(c)));
      return;
    }
    resegment(symbols_[it->second.first], out);
    resegment(symbols_[it->second.second], out);
  }

  const Vocab& v_;
  const std::string& text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

int32_t spm_byte_token(const Vocab& v, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  int32_t id = v.find(std::string_view(buf, 6));
  if (id < 0) id = v.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  if (id < 0) id = v.unk;  // llama.cpp would throw here
  if (id < 0) {
    throw Error(v.path + ": no token for byte " + std::to_string(byte) +
                " (no byte-fallback token and no tokenizer.ggml.unknown_token_id)");
  }
  return id;
}

void spm_tokenize(const Vocab& vocab, const std::string& text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).run(out);
}

}  // namespace sy
