#pragma once
// Included first in every source of Amphora's libraries (cmake/AmphoraLibrary.cmake).
// nlohmann::json is part of Amphora's interface (materializer<nlohmann::json>,
// metadata, parameters), but a library built with hidden symbols would give
// its types hidden visibility, and with them every symbol that names one. Its
// types are declared here with default visibility; what of them the libraries
// do not declare is still kept out by cmake/amphora.map.

#pragma GCC visibility push(default)
#include <nlohmann/json.hpp>
#pragma GCC visibility pop
