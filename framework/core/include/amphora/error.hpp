#pragma once
// Exceptions thrown by Amphora. Every message names the artifact, file or
// argument at fault and what is wrong with it.

#include <stdexcept>
#include <string>

namespace amphora {

/// Base of every exception Amphora throws; catch this to handle them all.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed something malformed: a bad ref, name, option or shape.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A ref, name, version, file or materializer does not exist.
class NotFound : public Error {
 public:
  using Error::Error;
};

/// Data read from disk is damaged or inconsistent (bad digest, truncated file,
/// impossible size, malformed header, path escaping the artifact).
class CorruptData : public Error {
 public:
  using Error::Error;
};

/// The data is well formed but uses something this build cannot handle
/// (a newer format version, an unknown dtype, an unregistered materializer).
class Unsupported : public Error {
 public:
  using Error::Error;
};

/// An operating-system call failed; the message carries the path and errno text.
class IoError : public Error {
 public:
  using Error::Error;
};

/// The machine ran out of something Amphora needed: memory, threads or file
/// descriptors. Nothing is wrong with the data or the arguments.
class OutOfResources : public Error {
 public:
  using Error::Error;
};

}  // namespace amphora
