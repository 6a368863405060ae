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
  // Binds *slot to the function `name`; when there is none, appends the
  // name to *missing (comma-separated; null: an optional symbol) and
  // returns false.
  template <typename Fn>
  bool bind(Fn** slot, const char* name, std::string* missing) const {
    *slot = reinterpret_cast<Fn*>(symbol(name));
    if (!*slot && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
    return *slot != nullptr;
  }
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
