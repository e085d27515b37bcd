#include "xml.hpp"

#include <expat.h>

#include <limits>
#include <memory>
#include <stdexcept>

namespace amphora::detail::xml {

namespace {

constexpr std::size_t kMaxDepth = 16;
constexpr std::size_t kMaxElements = 100000;
constexpr std::size_t kMaxText = 64u << 20;

struct Builder {
  Element root;
  std::vector<Element*> open;  // the path from the document element to the current one
  std::size_t elements = 0;
  std::size_t text = 0;
  std::string error;
  XML_Parser parser = nullptr;

  void fail(std::string why) {
    if (error.empty()) error = std::move(why);
    XML_StopParser(parser, XML_FALSE);
  }
};

std::string local_name(const char* name) {
  std::string_view n(name);
  auto colon = n.rfind(':');
  return std::string(colon == std::string_view::npos ? n : n.substr(colon + 1));
}

void on_start(void* user, const char* name, const char**) {
  auto& b = *static_cast<Builder*>(user);
  if (++b.elements > kMaxElements) return b.fail("more than " + std::to_string(kMaxElements) + " elements");
  if (b.open.size() >= kMaxDepth) return b.fail("elements nested deeper than " + std::to_string(kMaxDepth) + " levels");
  Element* element;
  if (b.open.empty()) {
    element = &b.root;
  } else {
    b.open.back()->children.emplace_back();
    element = &b.open.back()->children.back();
  }
  element->name = local_name(name);
  b.open.push_back(element);
}

void on_end(void* user, const char*) {
  auto& b = *static_cast<Builder*>(user);
  if (!b.open.empty()) b.open.pop_back();
}

void on_text(void* user, const char* text, int size) {
  auto& b = *static_cast<Builder*>(user);
  b.text += static_cast<std::size_t>(size);
  if (b.text > kMaxText) return b.fail("more than " + std::to_string(kMaxText) + " bytes of text");
  if (!b.open.empty()) b.open.back()->text.append(text, static_cast<std::size_t>(size));
}

// S3 never sends a document type; one could declare entities that expand.
void on_doctype(void* user, const char*, const char*, const char*, int) {
  static_cast<Builder*>(user)->fail("a document type declaration (S3 sends none)");
}

}  // namespace

const Element* Element::find(std::string_view child) const {
  for (const auto& c : children)
    if (c.name == child) return &c;
  return nullptr;
}

std::string Element::text_of(std::string_view child) const {
  const Element* c = find(child);
  return c ? c->text : std::string();
}

Element parse(std::string_view document) {
  // A namespace-aware parser would split names on a separator; names are
  // reduced to their local part by hand instead, so one parser serves both.
  std::unique_ptr<std::remove_pointer_t<XML_Parser>, decltype(&XML_ParserFree)> parser(XML_ParserCreate("UTF-8"),
                                                                                        &XML_ParserFree);
  if (!parser) throw std::runtime_error("out of memory starting the XML parser");
  Builder builder;
  builder.parser = parser.get();
  XML_SetUserData(parser.get(), &builder);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  XML_SetStartDoctypeDeclHandler(parser.get(), on_doctype);
  if (document.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("XML document too large");
  if (XML_Parse(parser.get(), document.data(), static_cast<int>(document.size()), XML_TRUE) != XML_STATUS_OK) {
    std::string why = builder.error.empty() ? XML_ErrorString(XML_GetErrorCode(parser.get())) : builder.error;
    throw std::runtime_error("malformed XML at line " + std::to_string(XML_GetCurrentLineNumber(parser.get())) + ": " +
                             why);
  }
  if (builder.root.name.empty()) throw std::runtime_error("malformed XML: no document element");
  return std::move(builder.root);
}

}  // namespace amphora::detail::xml
