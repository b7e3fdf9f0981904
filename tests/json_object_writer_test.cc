// SPDX-License-Identifier: MIT
// JsonObjectWriter writes, member by member, exactly what nlohmann's
// dump(2) writes for the whole object (inspect --full --json relies on it).
#include "tools/cli/json_object_writer.h"

#include <gtest/gtest.h>

#include <sstream>

namespace vramflow {
namespace {

using Json = nlohmann::ordered_json;

// Writes `j` (an object whose "list" member, if any, is an array) through
// the writer, the array element by element.
std::string Streamed(const Json& j) {
  std::ostringstream out;
  JsonObjectWriter writer(out);
  for (const auto& [key, value] : j.items()) {
    if (key != "list") {
      writer.Member(key, value);
      continue;
    }
    writer.BeginArray(key);
    for (const Json& e : value) writer.Element(e);
    writer.EndArray();
  }
  writer.End();
  return out.str();
}

TEST(JsonObjectWriter, WritesWhatDumpWrites) {
  const std::vector<Json> cases = {
      Json::object(),
      Json{{"a", 1}},
      Json{{"list", Json::array()}},
      Json{{"head", "x\ny \"q\" \xc3\xa9"}, {"list", Json::array()}, {"tail", Json::object()}},
      Json{{"n", nullptr},
           {"list", Json::array({Json{{"id", 1}, {"attrs", Json::object()}, {"codecs", Json{{"lz4", {{"c", 2}}}}}},
                                 Json::array({1, 2}), Json::object(), 3.5, "s"})},
           {"words", Json{{"4-byte", 7}}},
           {"empty", Json::array()}},
  };
  for (const Json& j : cases) EXPECT_EQ(Streamed(j), j.dump(2) + "\n") << j.dump();
}

}  // namespace
}  // namespace vramflow
