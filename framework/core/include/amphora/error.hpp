#pragma once
// Exceptions thrown by Amphora. Every message names the artifact, file or
// argument at fault and what is wrong with it. Each class's destructor is
// defined in the library, which anchors its type information there: an
// exception thrown in one library (a plugin) is caught by its class in another.

#include <amphora/export.hpp>

#include <stdexcept>
#include <string>
#include <utility>

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

/// A remote store (an S3-compatible service) refused or failed a request:
/// the message names the remote, the request's key, the HTTP status and the
/// service's error code, never a credential. An IoError, so handlers of
/// failed storage catch it too.
class RemoteError : public IoError {
 public:
  RemoteError(const std::string& what, std::string remote, std::string key, long status, std::string code)
      : IoError(what), remote_(std::move(remote)), key_(std::move(key)), status_(status), code_(std::move(code)) {}
  ~RemoteError() override;
  /// Where the remote is (its URL).
  const std::string& remote() const noexcept { return remote_; }
  /// The object key the request was about; empty for a listing of the bucket.
  const std::string& key() const noexcept { return key_; }
  /// The HTTP status; 0 when no response came (a connection that failed).
  long status() const noexcept { return status_; }
  /// The service's error code ("AccessDenied", "NoSuchBucket", "SlowDown"), or empty.
  const std::string& code() const noexcept { return code_; }

 private:
  std::string remote_;
  std::string key_;
  long status_;
  std::string code_;
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
