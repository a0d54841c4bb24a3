// See include/ppstage/schedule/schedule_csv.h.
#include "ppstage/schedule/schedule_csv.h"

#include <sstream>

#include "ppstage/core/error.h"

namespace ppstage {

std::string scheduleToCsv(const std::vector<ActionList>& ranks, const std::string& comment) {
  std::ostringstream out;
  if (!comment.empty()) out << "# " << comment << '\n';
  for (const ActionList& list : ranks) {
    for (size_t i = 0; i < list.size(); ++i) out << (i ? "," : "") << toString(list[i]);
    out << '\n';
  }
  return out.str();
}

namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

ActionList parseLine(const std::string& line, const std::string& where_line) {
  ActionList list;
  size_t begin = 0;
  while (begin <= line.size()) {
    size_t end = line.find(',', begin);
    if (end == std::string::npos) end = line.size();
    size_t first = begin, last = end;
    while (first < last && blank(line[first])) ++first;
    while (last > first && blank(line[last - 1])) --last;
    const std::string where = detail::concat(where_line, ":", first + 1);
    PPSTAGE_CHECK(first < last, where, ": empty action (two commas in a row or a trailing comma)");
    list.push_back(parseAction(std::string_view(line).substr(first, last - first), where));
    begin = end + 1;
  }
  return list;
}

}  // namespace

std::vector<ActionList> scheduleFromCsv(const std::string& text, const std::string& source) {
  std::vector<ActionList> ranks;
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    size_t first = 0;
    while (first < line.size() && blank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    ranks.push_back(parseLine(line, detail::concat(source, ":", number)));
  }
  PPSTAGE_CHECK(!ranks.empty(), source, ": no ranks (one line of actions per rank)");
  return ranks;
}

}  // namespace ppstage
