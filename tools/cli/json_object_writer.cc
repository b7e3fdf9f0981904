// SPDX-License-Identifier: MIT
#include "tools/cli/json_object_writer.h"

namespace vramflow {

constexpr int kIndent = 2;  // as dump(2)

JsonObjectWriter::JsonObjectWriter(std::ostream& out) : out_(out) { out_ << '{'; }

void JsonObjectWriter::Next(bool* first, int indent) {
  out_ << (*first ? "\n" : ",\n") << std::string(static_cast<size_t>(indent), ' ');
  *first = false;
}

void JsonObjectWriter::Write(const nlohmann::ordered_json& value, int indent) {
  // dump() escapes newlines inside strings, so every newline in its text
  // starts a line to indent.
  const std::string text = value.dump(kIndent);
  const std::string margin(static_cast<size_t>(indent), ' ');
  for (char c : text) {
    out_ << c;
    if (c == '\n') out_ << margin;
  }
}

void JsonObjectWriter::Member(const std::string& key, const nlohmann::ordered_json& value) {
  Next(&first_member_, kIndent);
  out_ << nlohmann::ordered_json(key).dump() << ": ";
  Write(value, kIndent);
}

void JsonObjectWriter::Members(const nlohmann::ordered_json& members) {
  for (const auto& [key, value] : members.items()) Member(key, value);
}

void JsonObjectWriter::BeginArray(const std::string& key) {
  Next(&first_member_, kIndent);
  out_ << nlohmann::ordered_json(key).dump() << ": [";
  first_element_ = true;
}

void JsonObjectWriter::Element(const nlohmann::ordered_json& value) {
  Next(&first_element_, 2 * kIndent);
  Write(value, 2 * kIndent);
}

void JsonObjectWriter::EndArray() {
  if (!first_element_) out_ << '\n' << std::string(kIndent, ' ');
  out_ << ']';
}

void JsonObjectWriter::End() {
  if (!first_member_) out_ << '\n';
  out_ << "}\n";
}

}  // namespace vramflow
