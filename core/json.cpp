#include "core/json.h"

#include "core/check.h"

namespace laconic {

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  using Event = nlohmann::json::parse_event_t;
  // `depth` counts the containers around the one that starts: 0 for the document itself.
  const nlohmann::json::parser_callback_t bounded = [&](int depth, Event event, nlohmann::json&) {
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
      LC_INPUT_ERROR(where, ": JSON nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text, bounded);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error while parsing
    // value - invalid literal; last read: '...'": the id goes, and so does the text last read,
    // which may be a whole string of the file.
    std::string what = e.what();
    if (const auto id = what.find("] "); id != std::string::npos) what.erase(0, id + 2);
    if (const auto last = what.find("; last read"); last != std::string::npos) what.erase(last);
    LC_INPUT_ERROR(where, ": not valid JSON: ", printable(what, 200));
  }
}

}  // namespace laconic
