// Compile-time comparison of hetccl's vendor table (src/runtime/
// vendor_api.h: handles as void*, error codes as int) with the vendors' own
// declarations: each slot must take and return what the vendor function
// does, in calling-convention terms. Pointers match pointers (with the same
// size of pointee where both point at numbers), integers and enums match
// integers and enums of the same size, floating types only themselves.
// Used by vendor_api_cuda_signatures.cc and vendor_api_hip_signatures.cc.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "runtime/vendor_api.h"

namespace hetccl::vendor_check {

template <typename T> constexpr bool isNumber() { return std::is_integral_v<T> || std::is_enum_v<T>; }

template <typename A, typename B> constexpr bool sameInCalls() {
  if constexpr (std::is_pointer_v<A> || std::is_pointer_v<B>) {
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
  } else if constexpr (isNumber<A>() && isNumber<B>()) {
    return sizeof(A) == sizeof(B);
  } else {
    return false;
  }
}

template <typename... T> struct Args {};
template <typename... A, typename... B> constexpr bool argsMatch(Args<A...>, Args<B...>) {
  if constexpr (sizeof...(A) != sizeof...(B))
    return false;
  else
    return (true && ... && sameInCalls<A, B>());
}

template <typename Ours, typename Theirs> struct Matches : std::false_type {};
template <typename R1, typename... A1, typename R2, typename... A2>
struct Matches<R1 (*)(A1...), R2 (*)(A2...)>
    : std::bool_constant<sameInCalls<R1, R2>() && argsMatch(Args<A1...>{}, Args<A2...>{})> {};

// A slot checked against a vendor declaration, for the run-time test that
// every binding's name is one that was checked.
struct CheckedSlot {
  size_t slot;
  const char* name;
};

}  // namespace hetccl::vendor_check

// Checks slot `member` against the vendor function `fn` (not overloaded).
#define HETCCL_CHECK_SLOT(member, fn)                                                                         \
  static_assert(::hetccl::vendor_check::Matches<decltype(::hetccl::vendor_api::Api::member), decltype(&fn)>::value, \
                "vendor_api.h: slot " #member " does not match " #fn "'s declaration");
// The same for an overloaded vendor name: the type (last) picks the C declaration
// (and must exist exactly as written in the vendor header).
#define HETCCL_CHECK_OVERLOADED_SLOT(member, fn, ...)                                                        \
  using hetccl_type_of_##member = __VA_ARGS__;                                                               \
  static_assert(::hetccl::vendor_check::Matches<decltype(::hetccl::vendor_api::Api::member),                 \
                                                hetccl_type_of_##member>::value,                             \
                "vendor_api.h: slot " #member " does not match " #fn "'s declaration");                      \
  [[maybe_unused]] const hetccl_type_of_##member hetccl_pick_##member = &fn;
#define HETCCL_CHECKED(member, fn) {offsetof(::hetccl::vendor_api::Api, member), #fn},
