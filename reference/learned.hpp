// -----------------------------------------------------------------------------
// Learned absolute position embeddings: a table lookup added to the token embedding
// -----------------------------------------------------------------------------
// Formula (code indices are 0-based; t = token index, o = position_offset):
//
//   row[t] = o + position[t]                      must satisfy 0 <= row[t] < max_positions
//   h[t][c] = e[t][c] + P[row[t]][c]              c = 0 .. d_model - 1
//
//   P is the learned table [max_positions, d_model]; e is the token embedding [tokens, d_model]
//   (for BERT: word + token-type embedding). A row outside the table is an error, never a
//   clamp or a wrap: the model has no embedding for it.
//   Invariants: decoding with a cache of k tokens (o + k, positions 0 .. n-1) equals rows k ..
//   k + n - 1 of the full forward; e = 0 gives the table row itself; the add is the only
//   arithmetic, so in any Real that holds e + P exactly the result is exact.
//
//   Symbols: max_positions = LearnedParams::max_positions, d_model = LearnedParams::d_model,
//   o = LearnedParams::position_offset.
//
// Source: A. Radford, K. Narasimhan, T. Salimans, I. Sutskever, "Improving Language
//   Understanding by Generative Pre-Training" (OpenAI report, 2018), Sec. 3.1, h_0 = U W_e + W_p;
//   A. Radford, J. Wu, R. Child, D. Luan, D. Amodei, I. Sutskever, "Language Models are
//   Unsupervised Multitask Learners" (OpenAI technical report, 2019; no arXiv ID), Sec. 2.3:
//   GPT-2 follows GPT's model, context 1024 (n_positions 1024);
//   J. Devlin, M.-W. Chang, K. Lee, K. Toutanova, "BERT: Pre-training of Deep Bidirectional
//   Transformers for Language Understanding", arXiv:1810.04805v2, Sec. 3 ("Input/Output
//   Representations") and Fig. 2: the input is the sum of token, segment and position
//   embeddings (max_position_embeddings 512).
// Index note: the papers give no index base; the released models start at row 0 (HF
//   position_ids = arange(past_length, past_length + n)). fairseq / RoBERTa / OPT / BART start at a
//   later row: fairseq make_positions gives padding_idx + 1 for the first token (RoBERTa:
//   padding_idx 1, so row 2, table 514 rows), OPT and BART add a fixed offset 2. Model those as
//   position_offset = 2 with 0-based positions. A KV cache of k tokens is position_offset = k (HF
//   past_key_values_length).
// Names elsewhere: HF BertEmbeddings.position_embeddings (nn.Embedding(max_position_embeddings,
//   hidden_size)) with past_key_values_length; HF GPT2Model.wpe (n_positions rows) with
//   past_length; fairseq LearnedPositionalEmbedding; HF OPTLearnedPositionalEmbedding and
//   BartLearnedPositionalEmbedding (offset 2); ggml_get_rows on the table then ggml_add;
//   ONNX Gather then Add.
// Not modelled: the token and token-type lookups that produce e, LayerNorm and dropout after
//   the sum, fairseq's zeroed padding row and its mask-dependent cumsum positions (the caller
//   supplies positions), and any rounding of e or P before the add (inputs are the stored
//   values).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"

namespace posenc::reference {

/// Configuration shared by reference, optimized, properties and golden code.
struct LearnedParams {
  std::int64_t max_positions = 0;    // rows of P (HF max_position_embeddings / n_positions)
  int d_model = 0;                   // columns of P and e (HF hidden_size / n_embd)
  std::int64_t position_offset = 0;  // o: added to every position (cache length, origin 2)
};

/// Throws InvalidArgument naming `function` unless p satisfies the formula's preconditions.
inline void learned_check(const LearnedParams& p, const char* function = "learned_check") {
  if (p.max_positions <= 0) {
    throw_invalid(function, "max_positions must be positive", p.max_positions);
  }
  if (p.d_model <= 0) throw_invalid(function, "d_model must be positive", p.d_model);
}

/// The table row that token t at `position` reads: o + position, checked against the table.
inline std::int64_t learned_row(const LearnedParams& p, std::int64_t position, std::size_t t,
                                const char* function = "learned_row") {
  std::int64_t row = 0;
  const std::int64_t o = p.position_offset;
  if (__builtin_add_overflow(o, position, &row)) {
    throw_invalid(function,
                  "position_offset " + std::to_string(o) + " + positions[" + std::to_string(t) +
                      "] overflows int64",
                  position);
  }
  if (row < 0 || row >= p.max_positions) {
    throw_invalid(function,
                  "row position_offset + positions[" + std::to_string(t) +
                      "] must lie in [0, max_positions = " + std::to_string(p.max_positions) + ")",
                  row);
  }
  return row;
}

namespace detail {
inline void learned_check_sizes(const LearnedParams& p, std::size_t table_size,
                                std::size_t n_tokens, std::size_t e_size, bool has_e,
                                const char* function) {
  learned_check(p, function);
  const std::size_t d = static_cast<std::size_t>(p.d_model > 0 ? p.d_model : 0);
  const std::size_t rows = static_cast<std::size_t>(p.max_positions);
  if (table_size != rows * d) {
    throw_invalid(
        function,
        "table must have max_positions * d_model = " + std::to_string(rows * d) + " entries",
        table_size);
  }
  if (has_e && e_size != n_tokens * d) {
    throw_invalid(function,
                  "e must have tokens * d_model = " + std::to_string(n_tokens * d) + " entries",
                  e_size);
  }
}

template <class Real>
std::vector<Real> learned_gather(const LearnedParams& p, span<const Real> table,
                                 span<const std::int64_t> positions, const char* function) {
  const std::size_t d = static_cast<std::size_t>(p.d_model > 0 ? p.d_model : 0);
  std::vector<Real> rows(positions.size() * d);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const std::size_t r = static_cast<std::size_t>(learned_row(p, positions[t], t, function));
    for (std::size_t c = 0; c < d; ++c) rows[t * d + c] = table[r * d + c];
  }
  return rows;
}
}  // namespace detail

/// The gathered rows P[o + positions[t]], row-major [positions.size(), d_model].
template <class Real>
std::vector<Real> learned_lookup(const LearnedParams& p, span<const Real> table,
                                 span<const std::int64_t> positions) {
  constexpr const char* fn = "learned_lookup";
  detail::learned_check_sizes(p, table.size(), positions.size(), 0, false, fn);
  return detail::learned_gather<Real>(p, table, positions, fn);
}

/// h = e + P[o + positions[t]], row-major [positions.size(), d_model]: one add in Real per
/// element, exact whenever Real holds the sum (always, for the oracle and dyadic inputs).
template <class Real>
std::vector<Real> learned_apply(const LearnedParams& p, span<const Real> table,
                                span<const std::int64_t> positions, span<const Real> e) {
  constexpr const char* fn = "learned_apply";
  detail::learned_check_sizes(p, table.size(), positions.size(), e.size(), true, fn);
  std::vector<Real> h = detail::learned_gather<Real>(p, table, positions, fn);
  for (std::size_t j = 0; j < h.size(); ++j) h[j] = e[j] + h[j];
  return h;
}

/// Convenience overloads for std::vector arguments (template deduction does not see spans).
template <class Real>
std::vector<Real> learned_lookup(const LearnedParams& p, const std::vector<Real>& table,
                                 const std::vector<std::int64_t>& positions) {
  return learned_lookup<Real>(p, span<const Real>(table), span<const std::int64_t>(positions));
}
template <class Real>
std::vector<Real> learned_apply(const LearnedParams& p, const std::vector<Real>& table,
                                const std::vector<std::int64_t>& positions,
                                const std::vector<Real>& e) {
  return learned_apply<Real>(p, span<const Real>(table), span<const std::int64_t>(positions),
                             span<const Real>(e));
}

}  // namespace posenc::reference
