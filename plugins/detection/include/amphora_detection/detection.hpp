#pragma once
// COCO-style object detection records as one artifact: the case of ZenML's
// materializer article, where a user of IceVision had to hand-write a
// materializer before a record collection could be stored. Include this
// header to save and load a detection::Dataset in a program; load the plugin
// (amphora_detection.so) to let programs that do not know the type, the
// `amphora` command among them, verify and export it.
//
// Layout (materializer "detection.dataset", format version 1): the records
// are the child "records", a record list (docs/FORMAT.md §7.9) with one
// column per field; the manifest's meta holds "label_names" (the label
// vocabulary, in index order), "boxes_per_label" (label name -> number of
// boxes, every label listed) and "records" (how many).

#include <amphora/describe.hpp>
#include <amphora/everyday.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace detection {

/// One image and the objects annotated in it.
struct Record {
  std::string file;                         ///< the image's path
  std::int32_t width = 0, height = 0;       ///< the image's size in pixels
  std::vector<std::array<float, 4>> boxes;  ///< per object: x, y, width, height in pixels
  std::vector<std::int32_t> labels;         ///< per object: an index into Dataset::label_names
  std::vector<float> areas;                 ///< per object: its segmented area in pixels
  std::vector<std::uint8_t> crowd;          ///< per object: 1 where the box covers a crowd (COCO's iscrowd)
  bool operator==(const Record&) const = default;
};
AMPHORA_MATERIALIZE(Record, "detection.record", 1, file, width, height, boxes, labels, areas, crowd)

/// A labelled set of images.
struct Dataset {
  std::vector<std::string> label_names;
  std::vector<Record> records;
  bool operator==(const Dataset&) const = default;
};

/// What is wrong with `d` (the first problem, naming the record and object),
/// or "" when it is consistent: per-object fields of equal length, labels
/// within the vocabulary, finite boxes of non-negative size, unique labels.
inline std::string problem(const Dataset& d) {
  if (std::set<std::string>(d.label_names.begin(), d.label_names.end()).size() != d.label_names.size())
    return "label names repeat";
  for (std::size_t i = 0; i < d.records.size(); ++i) {
    const Record& r = d.records[i];
    const std::string at = "record " + std::to_string(i) + " (" + r.file + ")";
    const std::size_t n = r.boxes.size();
    if (r.labels.size() != n || r.areas.size() != n || r.crowd.size() != n)
      return at + " has " + std::to_string(n) + " boxes but " + std::to_string(r.labels.size()) + " labels, " +
             std::to_string(r.areas.size()) + " areas and " + std::to_string(r.crowd.size()) + " crowd flags";
    if (r.width < 0 || r.height < 0) return at + " has a negative image size";
    for (std::size_t k = 0; k < n; ++k) {
      const auto& b = r.boxes[k];
      if (!(std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3])) || b[2] < 0 ||
          b[3] < 0)
        return at + ", object " + std::to_string(k) + ": the box is not finite with a non-negative size";
      if (r.labels[k] < 0 || static_cast<std::size_t>(r.labels[k]) >= d.label_names.size())
        return at + ", object " + std::to_string(k) + ": label " + std::to_string(r.labels[k]) + " is not one of the " +
               std::to_string(d.label_names.size()) + " label names";
      if (r.crowd[k] > 1) return at + ", object " + std::to_string(k) + ": the crowd flag is not 0 or 1";
    }
  }
  return {};
}

/// Label name -> number of boxes with it, every label listed.
inline nlohmann::json boxes_per_label(const Dataset& d) {
  std::vector<std::uint64_t> counts(d.label_names.size(), 0);
  for (const auto& r : d.records)
    for (auto label : r.labels)
      if (label >= 0 && static_cast<std::size_t>(label) < counts.size()) ++counts[static_cast<std::size_t>(label)];
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t i = 0; i < counts.size(); ++i) out[d.label_names[i]] = counts[i];
  return out;
}

}  // namespace detection

template <>
struct amphora::materializer<detection::Dataset> {
  static constexpr std::string_view name = "detection.dataset";
  static constexpr int version = 1;
  /// Throws InvalidArgument naming the first inconsistency (detection::problem).
  static void save(const detection::Dataset& d, ArtifactWriter& out) {
    if (auto why = detection::problem(d); !why.empty()) throw InvalidArgument("detection dataset: " + why);
    out.meta()["label_names"] = d.label_names;
    out.meta()["boxes_per_label"] = detection::boxes_per_label(d);
    out.meta()["records"] = d.records.size();
    out.save_part("records", d.records);
  }
  /// Throws CorruptData when the records contradict the metadata.
  static detection::Dataset load(const ArtifactReader& in) {
    detection::Dataset d;
    d.label_names = in.meta<std::vector<std::string>>("label_names");
    d.records = in.load_child<std::vector<detection::Record>>("records");
    check(in, d);
    return d;
  }
  /// The check `amphora verify` runs: the records load, are consistent, and
  /// agree with the label vocabulary and counts of the metadata.
  static void validate(const ArtifactReader& in) { (void)load(in); }

 private:
  static void check(const ArtifactReader& in, const detection::Dataset& d) {
    if (auto why = detection::problem(d); !why.empty()) throw CorruptData(in.label() + ": " + why);
    if (in.meta<std::uint64_t>("records") != d.records.size())
      throw CorruptData(in.label() + ": the metadata counts " + std::to_string(in.meta<std::uint64_t>("records")) +
                        " records; the record list holds " + std::to_string(d.records.size()));
    if (in.meta()["boxes_per_label"] != detection::boxes_per_label(d))
      throw CorruptData(in.label() + ": boxes_per_label does not count the boxes the records hold");
  }
};
