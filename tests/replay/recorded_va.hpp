// Puts tensor address ranges into a dumped call.json, in the form replay reads them
// ("va": ["0x<lo>", "0x<hi>"], the bytes the tensor's file holds, as the JSON log writes them),
// for the aliasing tests. Dumps written before the writer recorded ranges lack them.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "mate/tensor/tensor_view.hpp"

namespace mate::testing {

inline std::string hex_address(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%jx", static_cast<std::uintmax_t>(v));
  return buf;
}

// Sets the range of each input named in `ranges` in `call_dir`/call.json.
inline void record_va(const std::string& call_dir, const std::map<std::string, tensor::VaRange>& ranges) {
  nlohmann::json j;
  {
    std::ifstream in(call_dir + "/call.json");
    j = nlohmann::json::parse(in);
  }
  for (nlohmann::json& a : j["inputs"]) {
    auto it = ranges.find(a["name"].get<std::string>());
    if (it != ranges.end()) a["va"] = {hex_address(it->second.lo), hex_address(it->second.hi)};
  }
  std::ofstream(call_dir + "/call.json") << j.dump();
}

}  // namespace mate::testing
