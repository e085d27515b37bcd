#pragma once
// The columnar tree behind a RecordCollection, shared by building, access
// and the materializer. Internal to the materializers.

#include <amphora/buffer.hpp>
#include <amphora/record_collection.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace amphora::detail {

/// What one place of the schema stores (docs/FORMAT.md §10.1).
enum class RecordKind : std::uint8_t { null, boolean, integer, floating, string, list, object, json };
std::string_view kind_name(RecordKind kind);

/// What a slot holds. The numbers are the builders' state bytes.
enum class SlotState : std::uint8_t { value = 0, null = 1, missing = 2 };

/// One place of the schema: a slot per value there (per record at the root,
/// per list item below a list; an object's fields have one per slot of the
/// object). Slots without a value hold zeros (or empty text).
struct RecordNode {
  RecordKind kind = RecordKind::null;
  bool is_unsigned = false;               ///< integer: uint64 rather than int64
  std::size_t slots = 0;
  std::shared_ptr<const Buffer> valid;    ///< LSB-first bitmap of slots holding a value; none: every slot does (kind null: none does)
  std::shared_ptr<const Buffer> missing;  ///< LSB-first bitmap of slots whose key is absent; none: no slot
  /// bool: a byte per slot; integer, float: 8 bytes per slot; list: int64
  /// offsets (slots + 1) into the items; string, json: int64 offsets into
  /// `bytes` (slots + 1, or the dictionary's size + 1 with `codes`).
  std::shared_ptr<const Buffer> values;
  std::shared_ptr<const Buffer> bytes;
  std::shared_ptr<const Buffer> codes;  ///< dictionary-encoded strings: a uint32 per slot
  std::vector<std::string> names;       ///< object: the fields, in schema order
  std::vector<RecordNode> children;     ///< object: one per field; list: the items
  std::shared_ptr<const Buffer> order_codes;  ///< object whose key order varies: a uint32 per slot into `orders`
  std::vector<std::vector<std::uint32_t>> orders;
  std::string label;  ///< the root's: what errors name
};

inline bool bit_at(const Buffer& bits, std::size_t i) {
  return ((static_cast<unsigned>(bits.data()[i / 8]) >> (i % 8)) & 1u) != 0;
}
SlotState state_at(const RecordNode& n, std::size_t i);
/// The text of slot `i` of a string or json node.
std::string_view text_at(const RecordNode& n, std::size_t i);
/// A node's entry in the schema (docs/FORMAT.md §10.1) without its items
/// or fields: kind, nullable, optional, and dtype or key_order.
nlohmann::json schema_entry(RecordKind kind, bool is_unsigned, bool nullable, bool optional, bool per_record);
nlohmann::json schema_of(const RecordNode& n);

/// Reads a JSON lines file as RecordCollection::read_jsonl does (a first
/// pass infers the schema), then reads it `passes` more times, handing each
/// pass's records to take(pass, root, count) in chunks of about
/// `chunk_bytes` of text (all at once for 0), each chunk the root node of
/// its records under the whole file's schema. A file without records gives
/// one empty chunk per pass. Throws as read_jsonl.
void read_jsonl_chunks(const std::filesystem::path& file, int passes, std::size_t chunk_bytes,
                       const std::function<void(int pass, RecordNode&& root, std::size_t count)>& take,
                       const std::function<void(std::uint64_t)>& progress);

/// Builds collections from a root node, and reaches theirs.
struct RecordAccess {
  static RecordCollection make(std::shared_ptr<const RecordNode> root, std::size_t size) {
    return RecordCollection(std::move(root), size);
  }
  static const RecordNode& root(const RecordCollection& c) { return *c.root_; }
};

}  // namespace amphora::detail
