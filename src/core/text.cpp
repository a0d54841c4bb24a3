// See include/ppstage/core/text.h.
#include "ppstage/core/text.h"

#include <charconv>

namespace ppstage {

std::string shortestText(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  return std::string(text, end);
}

std::vector<std::string> splitList(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::string item;
  auto flush = [&] {
    const auto begin = item.find_first_not_of(" \t\r");
    if (begin != std::string::npos) {
      items.push_back(item.substr(begin, item.find_last_not_of(" \t\r") - begin + 1));
    }
    item.clear();
  };
  for (char c : text) {
    if (c == separator) {
      flush();
    } else {
      item += c;
    }
  }
  flush();
  return items;
}

std::string joinText(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string shapeText(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace ppstage
