// SPDX-License-Identifier: MIT
// JsonObjectWriter: writes one JSON object to a stream member by member,
// laid out byte for byte as nlohmann's dump(2) lays out the whole object,
// so that a report with a long array (inspect --full's objects) is written
// as it goes and never exists whole in memory as a JSON tree.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace vramflow {

class JsonObjectWriter {
 public:
  // Writes the opening brace.
  explicit JsonObjectWriter(std::ostream& out);
  JsonObjectWriter(const JsonObjectWriter&) = delete;
  JsonObjectWriter& operator=(const JsonObjectWriter&) = delete;

  // "key": value.
  void Member(const std::string& key, const nlohmann::ordered_json& value);
  // Every member of `members`, in order.
  void Members(const nlohmann::ordered_json& members);
  // "key": [ ... ]: opens an array member whose elements follow.
  void BeginArray(const std::string& key);
  void Element(const nlohmann::ordered_json& value);
  void EndArray();
  // The closing brace and a newline.
  void End();

 private:
  // Starts a member or an element at `indent` spaces.
  void Next(bool* first, int indent);
  // `value` pretty-printed as it would be at `indent` spaces.
  void Write(const nlohmann::ordered_json& value, int indent);

  std::ostream& out_;
  bool first_member_ = true;
  bool first_element_ = true;
};

}  // namespace vramflow
