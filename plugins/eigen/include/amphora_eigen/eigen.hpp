#pragma once
// Eigen's dense matrices and vectors as artifacts, taught to Amphora from
// outside: Eigen is not modified and knows nothing of Amphora; a partial
// specialization of amphora::materializer covers every Eigen::Matrix of
// float, double, int32 or int64, whatever its sizes and storage order.
// Include this header to save and load them in a program; load the plugin
// (amphora_eigen.so) to let programs that do not know Eigen, the `amphora`
// command among them, verify and load them by name.
//
// Layout (format version 1): one file, "matrix.npy", a C-order .npy array
// that numpy opens: (rows, cols) for a matrix, (rows) for a column vector
// (an Eigen::Matrix with one column at compile time), whatever the storage
// order in memory, so a row-major and a column-major matrix of equal values
// are one artifact. Meta: "rows" and "cols". Names: "eigen.matrix_f32",
// "eigen.matrix_f64", "eigen.matrix_i32", "eigen.matrix_i64" and
// "eigen.vector_*" likewise; a fixed-size type loads any artifact of its
// name whose shape fits it, and refuses others as TypeMismatch.

#include <amphora/array_view.hpp>
#include <amphora/materializer.hpp>
#include <amphora/registry.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace amphora_eigen {

/// The element types stored: those .npy and every reader share.
template <class S>
concept StoredScalar = std::is_same_v<S, float> || std::is_same_v<S, double> || std::is_same_v<S, std::int32_t> ||
                       std::is_same_v<S, std::int64_t>;

namespace detail {

template <class S, bool Vector>
inline constexpr std::string_view kName = "";
template <> inline constexpr std::string_view kName<float, false> = "eigen.matrix_f32";
template <> inline constexpr std::string_view kName<double, false> = "eigen.matrix_f64";
template <> inline constexpr std::string_view kName<std::int32_t, false> = "eigen.matrix_i32";
template <> inline constexpr std::string_view kName<std::int64_t, false> = "eigen.matrix_i64";
template <> inline constexpr std::string_view kName<float, true> = "eigen.vector_f32";
template <> inline constexpr std::string_view kName<double, true> = "eigen.vector_f64";
template <> inline constexpr std::string_view kName<std::int32_t, true> = "eigen.vector_i32";
template <> inline constexpr std::string_view kName<std::int64_t, true> = "eigen.vector_i64";

inline std::string dims(std::int64_t rows, std::int64_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

}  // namespace detail

}  // namespace amphora_eigen

template <amphora_eigen::StoredScalar S, int Rows, int Cols, int Options, int MaxRows, int MaxCols>
struct amphora::materializer<Eigen::Matrix<S, Rows, Cols, Options, MaxRows, MaxCols>> {
  using Value = Eigen::Matrix<S, Rows, Cols, Options, MaxRows, MaxCols>;
  using RowMajor = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  static constexpr bool is_vector = Cols == 1;
  static constexpr std::string_view name = amphora_eigen::detail::kName<S, is_vector>;
  static constexpr int version = 1;

  static void save(const Value& value, ArtifactWriter& out) {
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(value.rows())};
    if (!is_vector) shape.push_back(static_cast<std::int64_t>(value.cols()));
    const auto count = static_cast<std::size_t>(value.size());
    // numpy's C order: a vector or a row-major matrix already is; another
    // matrix is copied into it.
    if constexpr (is_vector || static_cast<bool>(Value::IsRowMajor) || Rows == 1) {
      out.write_array("matrix.npy", dtype_of<S>::value, shape, std::as_bytes(std::span<const S>(value.data(), count)));
    } else {
      const RowMajor rows_first = value;
      out.write_array("matrix.npy", dtype_of<S>::value, shape, std::as_bytes(std::span<const S>(rows_first.data(), count)));
    }
    out.meta()["rows"] = static_cast<std::int64_t>(value.rows());
    out.meta()["cols"] = static_cast<std::int64_t>(value.cols());
  }

  static Value load(const ArtifactReader& in) {
    const auto [rows, cols] = stored_dims(in);
    const ArrayView array = in.read_array("matrix.npy", dtype_of<S>::value, is_vector ? 1 : 2);
    const auto& shape = array.shape();
    if (shape[0] != rows || (is_vector ? cols != 1 : shape[1] != cols))
      throw CorruptData(in.label() + ": 'matrix.npy' does not hold the " + amphora_eigen::detail::dims(rows, cols) +
                        " values its meta says");
    const auto values = array.values<S>();
    return Value(Eigen::Map<const RowMajor>(values.data(), static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols)));
  }

  static void validate(const ArtifactReader& in) { (void)load(in); }

  /// From the metadata alone: refuses a shape this type cannot hold.
  static void accept(const ArtifactReader& in) { (void)stored_dims(in); }

 private:
  // The stored rows and columns, checked against what Value can hold.
  static std::pair<std::int64_t, std::int64_t> stored_dims(const ArtifactReader& in) {
    const auto rows = in.meta<std::int64_t>("rows");
    const auto cols = in.meta<std::int64_t>("cols");
    if (rows < 0 || cols < 0 || (is_vector && cols != 1))
      throw CorruptData(in.label() + ": meta says " + amphora_eigen::detail::dims(rows, cols) + ", not a " +
                        (is_vector ? "column vector" : "matrix") + "'s size");
    const bool fits = (Rows == Eigen::Dynamic ? (MaxRows == Eigen::Dynamic || rows <= MaxRows) : rows == Rows) &&
                      (Cols == Eigen::Dynamic ? (MaxCols == Eigen::Dynamic || cols <= MaxCols) : cols == Cols);
    if (!fits)
      throw TypeMismatch(in.label() + " holds a " + amphora_eigen::detail::dims(rows, cols) + " " +
                         std::string(name) + ", which " + type_display_name(typeid(Value)) + " cannot hold");
    return {rows, cols};
  }
};
