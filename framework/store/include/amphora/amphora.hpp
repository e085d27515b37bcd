#pragma once
// Everything a program that saves and loads artifacts needs from the core.

#include <amphora/artifact.hpp>
#include <amphora/buffer.hpp>
#include <amphora/json.hpp>
#include <amphora/digest.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>
#include <amphora/materializer.hpp>
#include <amphora/parallel.hpp>
#include <amphora/registry.hpp>
#include <amphora/store.hpp>
