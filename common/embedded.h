// Files compiled into the binary by cmake/embed.cmake (migrations, OpenAPI
// document, engine data). The returned views point at static storage that
// lives as long as the process.
#pragma once

#include <string_view>

namespace eq::embedded {

// The contents of a file embedded at build time, by its path relative to the
// source root; an empty view when no such file was embedded.
std::string_view file(std::string_view path);

}  // namespace eq::embedded
