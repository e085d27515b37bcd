#pragma once
// The XML documents S3 answers with (listings, errors, multipart uploads),
// read with expat into a small tree. Bounded: a document deeper than 16
// levels, with more than 100,000 elements or 64 MiB of text, or with a
// document type declaration (which could declare entities to expand) is
// refused. Internal to the framework.

#include <string>
#include <string_view>
#include <vector>

namespace amphora::detail::xml {

struct Element {
  std::string name;  ///< local name, without a namespace prefix
  std::string text;  ///< character data directly inside, entities decoded
  std::vector<Element> children;

  /// The first child named `child`, or nullptr.
  const Element* find(std::string_view child) const;
  /// The text of the first child named `child`, or empty.
  std::string text_of(std::string_view child) const;
};

/// Parses `document`. Throws std::runtime_error saying what is wrong and
/// where (line), for the caller to wrap with the request it answered.
Element parse(std::string_view document);

}  // namespace amphora::detail::xml
