#include "runtime/dynamic_library.h"

#include <dlfcn.h>

#include <utility>

namespace hetccl {

DynamicLibrary::~DynamicLibrary() {
  if (handle_) dlclose(handle_);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

DynamicLibrary DynamicLibrary::open(const std::string& name, int flags, std::string* why) {
  DynamicLibrary lib;
  dlerror();
  lib.handle_ = dlopen(name.c_str(), flags);
  if (lib.handle_) {
    lib.path_ = name;
  } else if (why) {
    const char* e = dlerror();
    *why += (why->empty() ? "" : "; ") + std::string(e ? e : name.c_str());
  }
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

}  // namespace hetccl
