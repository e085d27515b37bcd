#pragma once
// Exceptions thrown by Amphora. Every message names the artifact, file or
// argument at fault and what is wrong with it. Each class's destructor is
// defined in the library, which anchors its type information there: an
// exception thrown in one library (a plugin) is caught by its class in another.

#include <amphora/export.hpp>

#include <stdexcept>
#include <string>

AMPHORA_API_BEGIN

namespace amphora {

/// Base of every exception Amphora throws; catch this to handle them all.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~Error() override;
};

/// A caller passed something malformed: a bad ref, name, option or shape.
class InvalidArgument : public Error {
 public:
  using Error::Error;
  ~InvalidArgument() override;
};

/// A ref, name, version, file or materializer does not exist.
class NotFound : public Error {
 public:
  using Error::Error;
  ~NotFound() override;
};

/// Data read from disk is damaged or inconsistent (bad digest, truncated file,
/// impossible size, malformed header, path escaping the artifact).
class CorruptData : public Error {
 public:
  using Error::Error;
  ~CorruptData() override;
};

/// The data is well formed but uses something this build cannot handle
/// (a newer format version, an unknown dtype, an unregistered materializer).
class Unsupported : public Error {
 public:
  using Error::Error;
  ~Unsupported() override;
};

/// The stored value is intact but is not of the type it was loaded as (a
/// 3x4 tensor loaded as a std::vector<float>, a map as a struct): the
/// message says what is stored and what was asked for. An Unsupported, so
/// existing handlers of that class still catch it; CorruptData is kept for
/// damaged bytes.
class TypeMismatch : public Unsupported {
 public:
  using Unsupported::Unsupported;
  ~TypeMismatch() override;
};

/// An operating-system call failed; the message carries the path and errno text.
class IoError : public Error {
 public:
  using Error::Error;
  ~IoError() override;
};

/// The machine ran out of something Amphora needed: memory, threads or file
/// descriptors. Nothing is wrong with the data or the arguments.
class OutOfResources : public Error {
 public:
  using Error::Error;
  ~OutOfResources() override;
};

}  // namespace amphora

AMPHORA_API_END
