#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "tokenizer/unicode.h"

namespace sy {

namespace {

constexpr const char* kMergesKey = "tokenizer.ggml.merges";

struct Symbol {
  int prev, next;
  size_t off, n;  // n == 0 once merged into its left neighbour
};

struct Bigram {
  int left, right;
  int rank;
  size_t left_n, right_n;  // sizes when queued: a changed size marks a stale entry
};

// Lowest rank first, then leftmost.
struct BigramAfter {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

}  // namespace

BpeModel::BpeModel(const GgufFile& f, const Vocab& vocab) : splitter_(vocab.pre_spec.regexes) {
  if (!f.has(kMergesKey)) throw Error(f.path() + ": missing " + std::string(kMergesKey));
  const std::vector<std::string_view>& merges = f.get_string_array(kMergesKey);
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Split at the first space after the first character, as llama.cpp does; a line
    // without one can never match a pair.
    const std::string_view m = merges[i];
    if (m.size() < 2 || m.find(' ', 1) == std::string_view::npos) continue;
    ranks_.emplace(std::string(m), static_cast<int32_t>(i));  // the first rank wins
  }
}

int BpeModel::rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::tokenize(const Vocab& vocab, std::string_view text,
                        std::vector<int32_t>& out) const {
  const unicode::ByteMap& bytes = unicode::byte_map();
  std::string encoded;
  for (const std::string& word : splitter_.split(text)) {
    encoded.clear();
    for (char c : word) encoded += bytes.byte_to_utf8(static_cast<uint8_t>(c));
    tokenize_word(vocab, encoded, out);
  }
}

void BpeModel::tokenize_word(const Vocab& vocab, const std::string& word,
                             std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::vector<Symbol> sym;
  if (vocab.ignore_merges && vocab.find(word) >= 0) {
    sym.push_back({-1, -1, 0, word.size()});
  } else {
    for (size_t off = 0; off < word.size();) {
      const size_t n = std::min(unicode::utf8_len(word[off]), word.size() - off);
      const int idx = static_cast<int>(sym.size());
      sym.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, off, n});
      off += n;
    }
  }
  const std::string_view w(word);
  std::priority_queue<Bigram, std::vector<Bigram>, BigramAfter> queue;
  auto add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const int r =
        rank(w.substr(sym[left].off, sym[left].n), w.substr(sym[right].off, sym[right].n));
    if (r >= 0) queue.push({left, right, r, sym[left].n, sym[right].n});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    // Symbols only grow, so unchanged sizes mean unchanged texts (llama.cpp compares texts).
    if (l.n == 0 || r.n == 0 || l.n != b.left_n || r.n != b.right_n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    add(l.prev, b.left);
    add(b.left, l.next);
  }

  for (const Symbol& s : sym) {
    if (s.n == 0) continue;
    const std::string_view piece = w.substr(s.off, s.n);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token: llama.cpp tries each raw byte of the piece as a token and drops the rest.
    for (size_t i = 0; i < piece.size(); ++i) {
      const int32_t b = vocab.find(piece.substr(i, 1));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace sy
