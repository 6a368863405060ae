// Compile-time comparison of hetccl's vendor table (src/runtime/
// vendor_api.h: handles as void*, error codes as int) with the vendors' own
// declarations: each slot must take and return what the vendor function
// does, in calling-convention terms. Pointers match pointers (with the same
// size of pointee where both point at numbers), an enum matches an integer
// of its size, other types only themselves.
// Used by vendor_api_cuda_signatures.cc, vendor_api_hip_signatures.cc and
// vendor_library_signatures.cc.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "runtime/vendor_api.h"

namespace hetccl::vendor_check {

template <typename T> constexpr bool isNumber() { return std::is_integral_v<T> || std::is_enum_v<T>; }

// exactNumbers: integers and enums must be the same type (for tables typed
// from hetccl's own nccl.h), not just the same size (for vendor headers,
// whose enums hetccl's tables spell as int).
template <typename A, typename B, bool exactNumbers = false> constexpr bool sameInCalls() {
  if constexpr (std::is_same_v<A, B>) {
    return true;
  } else if constexpr (std::is_pointer_v<A> || std::is_pointer_v<B>) {
    if constexpr (!(std::is_pointer_v<A> && std::is_pointer_v<B>)) {
      return false;
    } else {
      using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
      using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
      if constexpr (isNumber<PA>() && isNumber<PB>()) return sizeof(PA) == sizeof(PB);
      return true;
    }
  } else if constexpr (std::is_floating_point_v<A> || std::is_floating_point_v<B>) {
    return std::is_same_v<A, B>;
  } else if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {
    return false;  // integers of different types (same types matched above)
  } else if constexpr (isNumber<A>() && isNumber<B>()) {
    return !exactNumbers && sizeof(A) == sizeof(B);  // an enum spelled as an integer of its size
  } else {
    return false;
  }
}

template <typename... T> struct Args {};
template <bool exactNumbers, typename... A, typename... B> constexpr bool argsMatch(Args<A...>, Args<B...>) {
  if constexpr (sizeof...(A) != sizeof...(B))
    return false;
  else
    return (true && ... && sameInCalls<A, B, exactNumbers>());
}

template <typename Ours, typename Theirs, bool exactNumbers = false> struct Matches : std::false_type {};
template <typename R1, typename... A1, typename R2, typename... A2, bool exactNumbers>
struct Matches<R1 (*)(A1...), R2 (*)(A2...), exactNumbers>
    : std::bool_constant<sameInCalls<R1, R2, exactNumbers>() &&
                         argsMatch<exactNumbers>(Args<A1...>{}, Args<A2...>{})> {};

// A slot checked against a vendor declaration, for the run-time test that
// every binding's name is one that was checked.
struct CheckedSlot {
  size_t slot;
  const char* name;
};

}  // namespace hetccl::vendor_check

// Checks slot `member` of a table against the function `fn` (not overloaded).
#define HETCCL_CHECK_TABLE_SLOT(table, exactNumbers, member, fn)                                                \
  static_assert(::hetccl::vendor_check::Matches<decltype(table::member), decltype(&fn), exactNumbers>::value, \
                #table ": slot " #member " does not match " #fn "'s declaration");
#define HETCCL_CHECK_SLOT(member, fn) HETCCL_CHECK_TABLE_SLOT(::hetccl::vendor_api::Api, false, member, fn)
// The same for an overloaded vendor name: the type (last) picks the C declaration
// (and must exist exactly as written in the vendor header).
#define HETCCL_CHECK_OVERLOADED_SLOT(member, fn, ...)                                                        \
  using hetccl_type_of_##member = __VA_ARGS__;                                                               \
  static_assert(::hetccl::vendor_check::Matches<decltype(::hetccl::vendor_api::Api::member),                 \
                                                hetccl_type_of_##member>::value,                             \
                "vendor_api.h: slot " #member " does not match " #fn "'s declaration");                      \
  [[maybe_unused]] const hetccl_type_of_##member hetccl_pick_##member = &fn;
#define HETCCL_CHECKED(member, fn) {offsetof(::hetccl::vendor_api::Api, member), #fn},
