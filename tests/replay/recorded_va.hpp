// The tensor address ranges a dumped call.json records ("va": ["0x<lo>", "0x<hi>"], the bytes each
// tensor spans, as the JSON log writes them), for the aliasing tests to check what the dump
// writer recorded before replaying it.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "mate/tensor/tensor_view.hpp"

namespace mate::testing {

// The `va` of each top-level input of `call_dir`/call.json that has one, by argument name.
inline std::map<std::string, tensor::VaRange> recorded_va(const std::string& call_dir) {
  std::ifstream in(call_dir + "/call.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, tensor::VaRange> out;
  for (const nlohmann::json& a : j["inputs"]) {
    if (!a.contains("va")) continue;
    out[a["name"].get<std::string>()] = {std::stoull(a["va"][0].get<std::string>(), nullptr, 16),
                                         std::stoull(a["va"][1].get<std::string>(), nullptr, 16)};
  }
  return out;
}

}  // namespace mate::testing
