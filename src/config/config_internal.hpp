// Private helpers shared by the config component's files.
#pragma once

#include <string_view>

namespace mate::config {

// Strips leading and trailing white space.
std::string_view trim(std::string_view s);

}  // namespace mate::config
