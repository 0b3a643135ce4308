// Named mistakes, typed. A scheme's built-in engine plants a deliberate bug named on the command
// line (`posenc engine --mistake NAME`, EngineOptions::mistake); its code branches on an
// enumerator, never on the name: each file that branches declares its mistakes once, as a
// MistakeTable of {enumerator, name}, and asks `is(o.mistake, Id::kName)`. A misspelt
// enumerator does not compile; a name no scheme accepts is caught by the test that every table's
// names are its schemes' mistakes (properties/diagnose_test.cpp,
// MistakeTables.EveryBranchNamesAMistakeOfItsScheme): tables register themselves here.
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reference/common/mutant.hpp"

namespace posenc::golden {

/// One mistake a file branches on. `unlisted`: a name the scheme's mistakes() does not list: a
/// retired name (kept so that its error can say what replaced it), or one only a negative
/// control plants (not a hypothesis of diagnose).
template <class E>
struct MistakeName {
  E id;
  const char* name;
  bool unlisted = false;
};

/// What every table registered: the schemes whose mistakes its names are (empty: any
/// scheme's), and its names with their unlisted flags.
struct MistakeTableRecord {
  std::vector<std::string> schemes;
  std::vector<std::pair<std::string, bool>> names;
};
inline std::vector<MistakeTableRecord>& mistake_tables() {
  static std::vector<MistakeTableRecord> all;
  return all;
}

/// The mistakes one file branches on. E has kNone (no mistake: the empty name) and kOther (a
/// name the table does not list: a mistake this file does not branch on).
template <class E, std::size_t N>
class MistakeTable {
 public:
  MistakeTable(std::initializer_list<const char*> schemes, std::array<MistakeName<E>, N> rows)
      : rows_(rows) {
    MistakeTableRecord r;
    for (const char* s : schemes) r.schemes.emplace_back(s);
    for (const auto& row : rows_) r.names.emplace_back(row.name, row.unlisted);
    // A table whose last name is misspelt (the branch no run takes).
    if (POSENC_MUTANT("golden_mistake_name_misspelt") && !r.names.empty()) r.names.back().first += "s";
    mistake_tables().push_back(std::move(r));
  }
  /// The enumerator of a name: kNone for "", kOther for a name not in the table.
  E of(std::string_view name) const {
    if (name.empty()) return E::kNone;
    for (const auto& row : rows_) {
      if (name == row.name) return row.id;
    }
    return E::kOther;
  }
  bool is(std::string_view name, E id) const { return of(name) == id; }

 private:
  std::array<MistakeName<E>, N> rows_;
};

}  // namespace posenc::golden
