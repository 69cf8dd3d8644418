// Counts the operator new calls a thread makes while it is armed, for "allocates nothing in
// steady state" tests. Include it in one file of a test binary: it replaces the global operator
// new (weakly, so that another replacement linked into the same binary wins: in_use() then says
// so and the test should skip). Per thread, so each rank of a threads-backend world counts its own.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace laconic::new_counter {

inline thread_local bool armed = false;
inline thread_local long count = 0;

// Counts what `fn` allocates on this thread.
template <class Fn>
long during(Fn&& fn) {
  const long before = count;
  armed = true;
  fn();
  armed = false;
  return count - before;
}

// Whether this counter is the operator new in use.
inline bool in_use() {
  return during([] {
           void* volatile probe = ::operator new(16);
           ::operator delete(probe);
         }) == 1;
}

}  // namespace laconic::new_counter

__attribute__((weak)) void* operator new(std::size_t n) {
  if (laconic::new_counter::armed) ++laconic::new_counter::count;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
__attribute__((weak)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((weak)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The nothrow form too (std::stable_sort's temporary buffer): libstdc++'s calls the one above,
// but a sanitizer's does not, and its block would then reach our free() (alloc-dealloc-mismatch).
__attribute__((weak)) void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
__attribute__((weak)) void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
