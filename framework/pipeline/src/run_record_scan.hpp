#pragma once
// Reading a run record's text without building it as a document: a record
// may hold thousands of steps, and listing runs or explaining a miss needs
// a few fields of each. Internal to the pipeline layer.

#include <functional>
#include <string>
#include <string_view>

namespace amphora::detail {

/// What scan_run_record hands over of one step: its name and status, and
/// its "ingredients" object as JSON text (empty when absent or not an object).
struct ScannedStep {
  std::string_view name, status, ingredients;
};

/// Walks the run record `text`: field(key, value) for each top-level string
/// field, step(s) for each object in "steps" (views valid during the call).
/// Memory stays near twice the text's size. Throws CorruptData starting
/// with `where` for text that is not a JSON object or has malformed parts.
void scan_run_record(std::string_view text, const std::string& where,
                     const std::function<void(std::string_view key, std::string_view value)>& field,
                     const std::function<void(const ScannedStep&)>& step);

}  // namespace amphora::detail
