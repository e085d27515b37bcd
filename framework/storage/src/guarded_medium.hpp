#pragma once
// The storage seam's side of the error contract: a store calls its medium
// (any Medium, the user's own included) only through this wrapper, which
// turns whatever the medium throws that is not an amphora::Error into one
// (IoError, OutOfResources), naming the medium.

#include <amphora/storage/medium.hpp>

#include <memory>

namespace amphora::detail {

std::shared_ptr<Medium> guard_medium(std::shared_ptr<Medium> inner);

}  // namespace amphora::detail
