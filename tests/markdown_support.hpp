// Tables of a Markdown file, for the tests that hold documentation to the rows it shows (the
// README's configuration table to the host schema, each plugin README's options to its table).
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::test {

struct MarkdownTable {
  std::vector<std::string> header;             // the cells of the first line, trimmed
  std::vector<std::vector<std::string>> rows;  // the cells of each row after the |---| line
  std::vector<int> lines;                      // each row's line number in the file
};

// The cells of one table line ("| `a` | b |" -> {"`a`", "b"}): split at '|' outside `code`,
// trimmed.
inline std::vector<std::string> markdown_cells(std::string_view line) {
  std::vector<std::string> cells;
  std::string cell;
  bool code = false;
  for (std::size_t i = line.starts_with('|') ? 1 : 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '`') code = !code;
    if (c == '|' && !code) {
      cells.push_back(cell);
      cell.clear();
      continue;
    }
    cell.push_back(c);
  }
  if (cell.find_first_not_of(" \t\r") != std::string::npos) cells.push_back(cell);  // no last '|'
  for (auto& s : cells) {
    const auto first = s.find_first_not_of(" \t\r");
    const auto last = s.find_last_not_of(" \t\r");
    s = first == std::string::npos ? "" : s.substr(first, last - first + 1);
  }
  return cells;
}

// The tables of `text`, in order: a run of lines starting with '|' whose second line is the
// |---| separator.
inline std::vector<MarkdownTable> markdown_tables(std::string_view text) {
  std::vector<MarkdownTable> out;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  MarkdownTable* table = nullptr;
  int row_in_table = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.starts_with('|')) {
      table = nullptr;
      continue;
    }
    if (!table) {
      out.push_back({markdown_cells(line), {}, {}});
      table = &out.back();
      row_in_table = 0;
      continue;
    }
    if (++row_in_table == 1) continue;  // |---|---|
    table->rows.push_back(markdown_cells(line));
    table->lines.push_back(number);
  }
  return out;
}

// The part of `text` under the heading line `heading` ("## Configuration"), up to the next heading
// of the same or a higher level; "" when there is no such heading.
inline std::string_view markdown_section(std::string_view text, std::string_view heading) {
  const auto level = heading.find(' ');
  std::size_t at = 0;
  while ((at = text.find(heading, at)) != std::string_view::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    const auto end_of_line = text.find('\n', at);
    if (line_start && text.substr(at, end_of_line - at) == heading) break;
    at += heading.size();
  }
  if (at == std::string_view::npos) return {};
  for (std::size_t next = text.find('\n', at); next != std::string_view::npos;
       next = text.find('\n', next + 1)) {
    const std::string_view rest = text.substr(next + 1);
    const auto hashes = rest.find_first_not_of('#');
    if (hashes != std::string_view::npos && hashes > 0 && hashes <= level &&
        rest.substr(hashes).starts_with(' '))
      return text.substr(at, next - at);
  }
  return text.substr(at);
}

// `code` -> code: a cell that is one code span, without its backticks; the cell as it is
// otherwise.
inline std::string unquoted(const std::string& cell) {
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`' &&
      cell.find('`', 1) == cell.size() - 1)
    return cell.substr(1, cell.size() - 2);
  return cell;
}

}  // namespace kiwi::test
