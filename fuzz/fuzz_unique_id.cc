// libFuzzer target: ncclUniqueId bytes as another process (or a file, or a
// launcher's environment) hands them over. Decoding must refuse garbage
// with an error, never crash or read past the id.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/unique_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, data, size < sizeof(id.internal) ? size : sizeof(id.internal));
  hetccl::DecodedId decoded;
  if (hetccl::decodeUniqueId(id, &decoded) == ncclSuccess) {
    // An accepted id names an address of a known family within the id.
    if (decoded.root.family() != AF_INET && decoded.root.family() != AF_INET6) __builtin_trap();
    if (decoded.root.length == 0 || decoded.root.length > sizeof(decoded.root.storage)) __builtin_trap();
  }
  return 0;
}
