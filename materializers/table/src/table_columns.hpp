#pragma once
// What saving a table column in memory and importing one from a CSV file
// share, so that both store the same bytes and metadata (docs/FORMAT.md §9).
// Internal to the materializers.

#include <amphora/table.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>

namespace amphora::detail {

/// The dtype a column of `type` stores its values as (bool as bool_,
/// timestamps as int64). Throws InvalidArgument for strings.
DType dtype_of_column(ColumnType type);

/// Throws InvalidArgument, as Table::make does, when column `k`'s `name` is
/// empty, not valid UTF-8, or already in `seen`; otherwise adds it there.
/// `seen` views the names, which must outlive it.
void check_column_name(std::unordered_set<std::string_view>& seen, std::string_view name, std::size_t k);

/// The payload files of column `k` start with this path.
inline std::string column_path(std::size_t k) { return "columns/" + std::to_string(k); }

/// The smallest and largest non-null, non-NaN value of a column, given one
/// at a time in row order.
template <class T>
struct ValueRange {
  bool any = false;
  T lo{}, hi{};

  void add(T v) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(v)) return;
    if (!any || v < lo) lo = v;
    if (!any || v > hi) hi = v;
    any = true;
  }

  /// add() of each value in turn; integers in one vectorizable pass.
  void add_all(std::span<const T> values) {
    if constexpr (std::is_integral_v<T>) {
      if (values.empty()) return;
      T l = any ? lo : values[0], h = any ? hi : values[0];
      for (T v : values) {
        l = v < l ? v : l;
        h = v > h ? v : h;
      }
      lo = l, hi = h, any = true;
    } else {
      for (T v : values) add(v);
    }
  }

  /// Sets meta "min" and "max" (null when there was no value, and for an
  /// infinite float: JSON has no infinities).
  void write(nlohmann::json& meta) const {
    auto bound = [&](T v) {
      if constexpr (std::is_floating_point_v<T>)
        if (!std::isfinite(v)) return nlohmann::json();
      return any ? nlohmann::json(v) : nlohmann::json();
    };
    meta["min"] = bound(lo);
    meta["max"] = bound(hi);
  }
};

}  // namespace amphora::detail
