#include <amphora/error.hpp>

namespace amphora {

// The key functions of the error classes: their vtables and type information
// are emitted here, once, and exported.
Error::~Error() = default;
InvalidArgument::~InvalidArgument() = default;
NotFound::~NotFound() = default;
CorruptData::~CorruptData() = default;
Unsupported::~Unsupported() = default;
TypeMismatch::~TypeMismatch() = default;
IoError::~IoError() = default;
RemoteError::~RemoteError() = default;
OutOfResources::~OutOfResources() = default;

}  // namespace amphora
