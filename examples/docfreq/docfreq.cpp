// The document-frequency pipeline: read a corpus of text files, tokenize it
// into a record collection, count in how many documents each word occurs,
// keep the top-k words as a model (merged strings, and frequencies sorted,
// delta-coded, bit-squeezed and LZ4-compressed), and report on it. After a
// run it prints the report and how many bytes the model takes stored in
// different layouts.
//
//   amphora_docfreq [--corpus DIR] [--sizes] [--store DIR] [--set model.top_k=500] ...
//
// Without --corpus it reads the small corpus bundled beside this file. The
// read step's cache key holds the digest of every .txt file it reads, so an
// edited, added or removed file reruns it (and, by early cutoff, the steps
// after it only if what it read changed).

#include <amphora/amphora.hpp>
#include <amphora/everyday.hpp>
#include <amphora/run_main.hpp>
#include <amphora/record_collection.hpp>
#include <amphora/tensor.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace docfreq {

namespace fs = std::filesystem;

/// The model: its words, and how many documents each occurs in.
struct Model {
  std::vector<std::string> words;
  std::vector<std::int64_t> frequencies;  // one per word
  std::int64_t documents = 0;
};

/// How a Model is laid out when saved (a save option, so the same model can
/// be stored several ways for the size table). The pipeline stores it
/// packed: frequencies in ascending order, the word offsets and frequencies
/// delta-coded and bit-squeezed, everything under LZ4.
struct ModelLayout {
  bool packed = true;
  bool lz4 = true;
};

/// The most frequent `k` words, ties broken by the word, in ascending order
/// of frequency (which delta coding needs).
Model top_words(const std::map<std::string, std::int64_t>& df, std::size_t k, std::int64_t documents) {
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [word, n] : df) ranked.emplace_back(n, word);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  ranked.resize(std::min(ranked.size(), k));
  std::reverse(ranked.begin(), ranked.end());
  Model m;
  m.documents = documents;
  for (auto& [n, word] : ranked) {
    m.words.push_back(word);
    m.frequencies.push_back(n);
  }
  return m;
}

}  // namespace docfreq

// The model's materializer: the words merged into one byte array with an
// array of offsets (string i is bytes [offsets[i], offsets[i+1])), and the
// frequencies, each a child tensor whose encoding the layout chooses.
template <>
struct amphora::materializer<docfreq::Model> {
  static constexpr std::string_view name = "amphora.examples.docfreq_model";
  static constexpr int version = 1;

  static void save(const docfreq::Model& m, ArtifactWriter& out) {
    if (m.frequencies.size() != m.words.size())
      throw InvalidArgument("docfreq model: " + std::to_string(m.words.size()) + " words but " +
                            std::to_string(m.frequencies.size()) + " frequencies");
    const auto layout = out.options().options.get<docfreq::ModelLayout>();
    std::string bytes;
    std::vector<std::int64_t> offsets{0};
    for (const auto& w : m.words) {
      bytes += w;
      offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    }
    const auto compression = layout.lz4 ? Compression::lz4 : Compression::none;
    TensorOptions plain{.compression = compression};
    TensorOptions sorted = plain;
    if (layout.packed) sorted.encoding = {.delta = true, .squeeze = true};
    auto n = static_cast<std::int64_t>(m.words.size());
    out.save_child("words", Tensor::from_values({static_cast<std::int64_t>(bytes.size())},
                                                std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())),
                   plain);
    out.save_child("offsets", Tensor::from_values({n + 1}, offsets), sorted);
    out.save_child("frequencies", Tensor::from_values({n}, m.frequencies), sorted);
    out.meta()["documents"] = m.documents;
    out.meta()["words"] = m.words.size();
  }

  static docfreq::Model load(const ArtifactReader& in) {
    docfreq::Model m;
    m.documents = in.meta<std::int64_t>("documents");
    const auto n = in.meta<std::size_t>("words");
    auto bytes = in.load_child<Tensor>("words");
    auto offsets = in.load_child<Tensor>("offsets");
    auto frequencies = in.load_child<Tensor>("frequencies");
    if (bytes.dtype() != DType::uint8 || offsets.dtype() != DType::int64 || frequencies.dtype() != DType::int64 ||
        offsets.num_elements() != n + 1 || frequencies.num_elements() != n)
      throw CorruptData(in.label() + ": children do not hold " + std::to_string(n) + " words");
    auto o = offsets.values<std::int64_t>();
    const auto* text = reinterpret_cast<const char*>(bytes.data());
    for (std::size_t i = 0; i < n; ++i) {
      if (o[i] < 0 || o[i] > o[i + 1] || static_cast<std::uint64_t>(o[i + 1]) > bytes.num_elements())
        throw CorruptData(in.label() + ": word offset " + std::to_string(i) + " is out of order or range");
      m.words.emplace_back(text + o[i], static_cast<std::size_t>(o[i + 1] - o[i]));
    }
    auto f = frequencies.values<std::int64_t>();
    m.frequencies.assign(f.begin(), f.end());
    return m;
  }
};

namespace docfreq {

// The files the read step's key lists (file_digests of the corpus), each
// checked against its digest as it is read: a file edited since it was
// listed would otherwise be cached under the digest of its old content.
std::map<std::string, std::string> read_corpus(const fs::path& dir, const nlohmann::json& listed) {
  std::map<std::string, std::string> texts;
  for (const auto& [file, digest] : listed.items()) {
    auto in = amphora::InputFile::open(dir / file);
    std::string text(in.size(), '\0');
    std::size_t got = 0;
    while (got < text.size()) {
      std::size_t n = in.read({reinterpret_cast<std::byte*>(text.data()) + got, text.size() - got});
      if (n == 0) break;
      got += n;
    }
    if (got != text.size() || amphora::Digest(amphora::Sha256::of(text)).str() != digest.get<std::string>())
      throw amphora::InvalidArgument((dir / file).string() + " changed while the corpus was read; run again");
    texts[file] = std::move(text);
  }
  if (texts.empty()) throw amphora::NotFound("corpus directory " + dir.string() + " holds no .txt files");
  return texts;
}

// One record per document: its file and its words, in order.
amphora::RecordCollection tokenize(const std::map<std::string, std::string>& texts, const amphora::StepContext& c) {
  const bool lowercase = c.param<bool>("lowercase");
  const auto min_length = c.param<std::size_t>("min_length");
  std::vector<nlohmann::json> records;
  for (const auto& [file, text] : texts) {
    nlohmann::json tokens = nlohmann::json::array();
    std::string word;
    auto flush = [&] {
      if (word.size() >= min_length) tokens.push_back(word);
      word.clear();
    };
    for (unsigned char ch : text) {
      if (std::isalpha(ch) || ch == '\'')
        word += static_cast<char>(lowercase ? std::tolower(ch) : ch);
      else
        flush();
    }
    flush();
    records.push_back({{"file", file}, {"tokens", std::move(tokens)}});
  }
  return amphora::RecordCollection::from_json(records);
}

// In how many documents each word occurs.
std::map<std::string, std::int64_t> count(const amphora::RecordCollection& docs) {
  std::map<std::string, std::int64_t> df;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto record = docs.record(i);
    std::vector<std::string> words;
    for (const auto& t : record["tokens"]) words.push_back(t.get<std::string>());
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    for (const auto& w : words) ++df[w];
  }
  return df;
}

std::string report(const Model& m) {
  std::ostringstream out;
  out << m.words.size() << " words from " << m.documents << " documents; the most frequent:";
  for (std::size_t i = m.words.size(); i-- > 0 && i + 10 >= m.words.size();)
    out << " " << m.words[i] << " (" << m.frequencies[i] << ")";
  return out.str();
}

// Payload bytes of an artifact and its children.
std::uint64_t stored_bytes(const amphora::ArtifactReader& artifact) {
  std::uint64_t bytes = artifact.manifest().payload_bytes();
  for (const auto& child : artifact.children()) bytes += stored_bytes(artifact.open_child(child.role));
  return bytes;
}

// The model stored in the layouts Modelforge's documentation compares: the
// pipeline's own (sorted, delta, squeeze, LZ4) measured in `store`, the
// others saved to a scratch store that is removed afterwards.
void print_sizes(const amphora::Store& store, const amphora::Digest& stored) {
  const Model sorted = store.load<Model>(stored);
  Model by_word;  // the order a map of words keeps: alphabetical
  std::map<std::string, std::int64_t> df;
  for (std::size_t i = 0; i < sorted.words.size(); ++i) df[sorted.words[i]] = sorted.frequencies[i];
  for (const auto& [w, n] : df) {
    by_word.words.push_back(w);
    by_word.frequencies.push_back(n);
  }
  by_word.documents = sorted.documents;

  std::string scratch_template = (fs::temp_directory_path() / "amphora-docfreq-sizes-XXXXXX").string();
  if (!::mkdtemp(scratch_template.data())) throw amphora::IoError("cannot create a directory like " + scratch_template);
  const fs::path scratch_dir = scratch_template;
  struct Remove {
    fs::path dir;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove{scratch_dir};
  auto scratch = amphora::Store::open(scratch_dir, {.create = true});
  auto size_of = [&](const Model& m, ModelLayout layout) {
    return stored_bytes(scratch.open_artifact(scratch.save(m, {.options = layout}).digest));
  };
  const std::uint64_t json = nlohmann::json(df).dump().size();
  const std::vector<std::pair<std::string, std::uint64_t>> rows = {
      {"JSON object {word: count}", json},
      {"arrays", size_of(by_word, {.packed = false, .lz4 = false})},
      {"arrays + lz4", size_of(by_word, {.packed = false, .lz4 = true})},
      {"arrays + sort(count) + lz4", size_of(sorted, {.packed = false, .lz4 = true})},
      {"arrays + sort(count) + delta + squeeze + lz4 (stored)", stored_bytes(store.open_artifact(stored))},
  };
  std::cout << "The model (" << sorted.words.size() << " words) stored in each layout, payload bytes:\n";
  std::printf("  %-54s %10s %8s\n", "layout", "bytes", "of JSON");
  for (const auto& [layout, bytes] : rows)
    std::printf("  %-54s %10llu %7.0f%%\n", layout.c_str(), static_cast<unsigned long long>(bytes),
                100.0 * static_cast<double>(bytes) / static_cast<double>(json));
}

}  // namespace docfreq

int main(int argc, char** argv) {
  // The program's own options, around run_main's: --corpus DIR is the read
  // step's parameter `corpus` (passed quoted, so --set reads it as a string
  // whatever it holds); --sizes prints the size table after the run.
  std::vector<std::string> args;
  bool sizes = false;
  auto corpus = [&](const std::string& dir) {
    std::string quoted;
    for (char ch : std::filesystem::absolute(dir).string()) quoted += ch == '\'' ? std::string("''") : std::string(1, ch);
    args.push_back("--set");
    args.push_back("read.corpus='" + quoted + "'");
  };
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--sizes") {
      sizes = true;
    } else if (arg == "--corpus" && i + 1 < argc) {
      corpus(argv[++i]);
    } else if (arg.starts_with("--corpus=")) {
      corpus(arg.substr(9));
    } else {
      if (arg == "--help" || arg == "-h")
        std::cout << "docfreq options: --corpus DIR (the .txt files to read; default the bundled corpus), --sizes (print\n"
                     "the model's size in each layout after the run); the pipeline's options follow.\n\n";
      args.push_back(std::move(arg));
    }
  }
  std::vector<char*> rewritten;
  for (auto& a : args) rewritten.push_back(a.data());

  amphora::Pipeline p("docfreq");
  auto texts = p.step({.name = "read",
                       .params = {{"corpus", AMPHORA_DOCFREQ_CORPUS}},
                       .outputs = {"texts"},
                       .external = [](const amphora::StepContext& c) {
                         return amphora::file_digests(c.param<std::string>("corpus"), ".txt");
                       }},
                      [](const amphora::StepContext& c) {
                        return docfreq::read_corpus(c.param<std::string>("corpus"), c.external());
                      });
  auto docs = p.step({.name = "tokenize", .params = {{"lowercase", true}, {"min_length", 2}}, .outputs = {"docs"}},
                     docfreq::tokenize, texts);
  auto df = p.step({.name = "count", .outputs = {"df"}}, docfreq::count, docs);
  auto model = p.step({.name = "model", .params = {{"top_k", 1000}}, .outputs = {"model"},
                       .save_options = docfreq::ModelLayout{}},
                      [](const std::map<std::string, std::int64_t>& counts, const amphora::RecordCollection& d,
                         const amphora::StepContext& c) {
                        return docfreq::top_words(counts, c.param<std::size_t>("top_k"),
                                                  static_cast<std::int64_t>(d.size()));
                      },
                      df, docs);
  p.step({.name = "report", .outputs = {"report"}}, docfreq::report, model);

  return amphora::run_main(p, static_cast<int>(rewritten.size()), rewritten.data(),
                           [sizes](amphora::Store& store, const amphora::RunReport& run) {
                             std::cout << store.load<std::string>(run.step("report").outputs.at(0).digest) << "\n";
                             if (sizes) docfreq::print_sizes(store, run.step("model").outputs.at(0).digest);
                           });
}
