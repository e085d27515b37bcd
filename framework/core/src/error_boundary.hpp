#pragma once
// The error contract's boundary: public entry points run their work through
// translate_errors, so that whatever the standard library, nlohmann::json, a
// user's materializer or a user's storage medium throws leaves Amphora as an
// amphora::Error of the right class. Internal to the libraries.

#include <amphora/error.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <new>
#include <string>
#include <system_error>

namespace amphora::detail {

/// Whose failure an unknown exception is, which decides its class.
enum class Blame {
  stored_data,  ///< reading what a store holds: a materializer's own error means the data is damaged (CorruptData)
  caller_value, ///< saving what a caller gave: it could not be stored (InvalidArgument)
  input,        ///< reading a file or text a caller named: it is not what it should be (InvalidArgument)
  medium        ///< a storage medium's call: the medium failed (IoError)
};

/// The amphora::Error for an exception that is not one, rethrown from a catch block.
[[noreturn]] inline void rethrow_translated(Blame blame, std::string_view context = {}) {
  auto say = [&](std::string what) { return context.empty() ? what : std::string(context) + ": " + what; };
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw OutOfResources(say("out of memory"));
  } catch (const std::length_error& e) {
    throw OutOfResources(say(std::string("out of memory: ") + e.what()));
  } catch (const std::filesystem::filesystem_error& e) {
    throw IoError(say(e.what()));
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::resource_unavailable_try_again || e.code() == std::errc::not_enough_memory ||
        e.code() == std::errc::too_many_files_open)
      throw OutOfResources(say(e.what()));
    throw IoError(say(e.what()));
  } catch (const nlohmann::json::exception& e) {
    if (blame == Blame::stored_data)
      throw CorruptData(say(std::string("stored metadata does not have the expected form: ") + e.what()));
    if (blame == Blame::caller_value)
      throw InvalidArgument(say(std::string("value cannot be stored as JSON: ") + e.what()));
    if (blame == Blame::input) throw InvalidArgument(say(e.what()));
    throw IoError(say(e.what()));
  } catch (const std::exception& e) {
    // A materializer's own failure (say std::out_of_range from a bad index):
    // on the way in the value could not be saved, on the way out the stored
    // data did not make sense to it.
    if (blame == Blame::stored_data) throw CorruptData(say(std::string("materializer failed reading the artifact: ") + e.what()));
    if (blame == Blame::caller_value) throw InvalidArgument(say(std::string("materializer failed saving the value: ") + e.what()));
    if (blame == Blame::input) throw InvalidArgument(say(e.what()));
    throw IoError(say(e.what()));
  } catch (...) {
    const char* what = "an exception that is not a std::exception";
    if (blame == Blame::stored_data) throw CorruptData(say(std::string("materializer failed reading the artifact: ") + what));
    if (blame == Blame::caller_value) throw InvalidArgument(say(std::string("materializer failed saving the value: ") + what));
    if (blame == Blame::input) throw InvalidArgument(say(what));
    throw IoError(say(what));
  }
}

/// Runs `body`; what it throws leaves as an amphora::Error (rethrow_translated).
template <class F>
auto translate_errors(Blame blame, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (...) {
    rethrow_translated(blame);
  }
}

}  // namespace amphora::detail
