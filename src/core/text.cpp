// See include/ppstage/core/text.h.
#include "ppstage/core/text.h"

#include <algorithm>
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

namespace {

// The optimal string alignment distance between `a` and `b`: Levenshtein's, where swapping
// two neighbouring characters ("stpes" for "steps") also costs 1.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closestName(const std::string& typed, const std::vector<std::string>& names) {
  const size_t limit = typed.size() >= 12 ? 3 : 2;
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& name : names) {
    const size_t distance = editDistance(typed, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string shapeText(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

namespace {

// The length of the valid UTF-8 sequence of a printable character at text[i] (2 to 4
// bytes), or 0 where there is none (or the character is a control or bidi one).
size_t printableUtf8Length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the byte after the lead
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  if (lead == 0xC2 && byte(i + 1) <= 0x9F) return 0;  // C1 control characters
  // Characters that reorder or break the line around them: U+2028-U+202E (line and
  // paragraph separators, bidi embeddings and overrides), U+2066-U+2069 (bidi isolates).
  if (lead == 0xE2 && byte(i + 1) == 0x80 && byte(i + 2) >= 0xA8 && byte(i + 2) <= 0xAE) return 0;
  if (lead == 0xE2 && byte(i + 1) == 0x81 && byte(i + 2) >= 0xA6 && byte(i + 2) <= 0xA9) return 0;
  return length;
}

}  // namespace

std::string printableText(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += text[i++];
      continue;
    }
    if (const size_t length = c >= 0x80 ? printableUtf8Length(text, i) : 0) {
      out.append(text, i, length);
      i += length;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
    ++i;
  }
  return out;
}

}  // namespace ppstage
