#include "launcher/process/shell_words.h"

#include <algorithm>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::launcher {

absl::StatusOr<std::vector<std::string>> ShellSplit(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("unterminated ' in '", text, "'"));
      }
      word.append(text, i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            (text[j + 1] == '"' || text[j + 1] == '\\' || text[j + 1] == '$' ||
             text[j + 1] == '`')) {
          ++j;
        }
        word.push_back(text[j]);
      }
      if (j >= text.size()) {
        return absl::InvalidArgumentError(absl::StrCat("unterminated \" in '", text, "'"));
      }
      in_word = true;
      i = j;
    } else if (c == '\\' && i + 1 < text.size()) {
      word.push_back(text[++i]);
      in_word = true;
    } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  return absl::StrJoin(argv, " ", [](std::string* out, const std::string& word) {
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("@%+=:,./-_^").find(c) != std::string_view::npos;
    });
    if (plain) {
      out->append(word);
      return;
    }
    out->push_back('\'');
    for (char c : word) {
      if (c == '\'') {
        out->append("'\\''");
      } else {
        out->push_back(c);
      }
    }
    out->push_back('\'');
  });
}

}  // namespace chorus::launcher
