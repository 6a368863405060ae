#include "common/name_list.h"

#include <cstdlib>

namespace hetccl {

bool nameListMatches(const std::string& list, const std::string& name, int port) {
  if (list.empty()) return true;
  const bool exclude = list[0] == '^';
  std::string items = exclude ? list.substr(1) : list;
  const bool exact = !items.empty() && items[0] == '=';
  if (exact) items = items.substr(1);
  bool hit = false;
  for (size_t start = 0; start <= items.size() && !hit;) {
    const size_t comma = items.find(',', start);
    std::string item = items.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? items.size() + 1 : comma + 1;
    int itemPort = -1;
    const size_t colon = port >= 0 ? item.rfind(':') : std::string::npos;
    if (colon != std::string::npos) {
      itemPort = atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    if (item.empty() || (itemPort >= 0 && itemPort != port)) continue;
    hit = exact ? item == name : name.compare(0, item.size(), item) == 0;
  }
  return exclude ? !hit : hit;
}

}  // namespace hetccl
