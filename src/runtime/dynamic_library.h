// A shared library opened with dlopen, closed when the owner goes away.
#pragma once

#include <string>

namespace hetccl {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary();
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // dlopen(name, flags); on failure, not loaded and the error appended to *why.
  static DynamicLibrary open(const std::string& name, int flags, std::string* why);

  void* symbol(const char* name) const;
  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }  // as opened
  // Forgets the handle without closing it (for libraries that must stay
  // loaded until exit, like GPU runtimes).
  void release() { handle_ = nullptr; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace hetccl
