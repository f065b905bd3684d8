// The byte trie the lexicon is matched with: one byte per edge, so Chinese,
// English and emoji terms share one structure and a longest match costs one
// walk from each start position.
//
// Ownership and threads: create() builds the engine's tries (Data::terms,
// Data::stages, tables.h, and the cue sets of situations.h) with insert() and never changes them afterwards;
// they are destroyed with the engine's tables. longest() is const and safe on
// any number of threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace eq::engine::builtin::detail {

class Trie {
 public:
  Trie() : nodes_(1) { root_.fill(-1); }

  // Returns false when the key is already present.
  bool insert(std::string_view key, int32_t value) {
    int32_t node = 0;
    for (size_t i = 0; i < key.size(); ++i) {
      const auto b = static_cast<unsigned char>(key[i]);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        if (node == 0) {
          root_[b] = next;
        } else {
          nodes_[static_cast<size_t>(node)].next.emplace_back(b, next);
        }
      }
      node = next;
    }
    Node& n = nodes_[static_cast<size_t>(node)];
    if (n.value >= 0) return false;
    n.value = value;
    return true;
  }

  // Calls found(end, value) for every key that starts at text[pos], the
  // shortest first; end is the offset just past the key.
  template <typename Found>
  void forEachAt(std::string_view text, size_t pos, Found found) const {
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) return;
      const Node& n = nodes_[static_cast<size_t>(node)];
      if (n.value >= 0) found(i + 1, n.value);
    }
  }

  // The longest key starting at text[pos] whose end satisfies accept(end);
  // returns {length, value}, or {0, -1} when none does.
  template <typename Accept>
  std::pair<size_t, int32_t> longest(std::string_view text, size_t pos, Accept accept) const {
    std::pair<size_t, int32_t> best{0, -1};
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const Node& n = nodes_[static_cast<size_t>(node)];
      if (n.value >= 0 && accept(i + 1)) best = {i + 1 - pos, n.value};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;
    int32_t value = -1;
  };

  int32_t child(int32_t node, unsigned char b) const {
    if (node == 0) return root_[b];
    for (const auto& [key, to] : nodes_[static_cast<size_t>(node)].next) {
      if (key == b) return to;
    }
    return -1;
  }

  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_;  // the root fans out widely; index it directly
};

}  // namespace eq::engine::builtin::detail
