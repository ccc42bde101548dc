// SPDX-License-Identifier: Apache-2.0
// Fibers for the CPU emulator (cuda_runtime.h): a stack of its own and a
// ucontext each, switched on one OS thread, with the switches announced to
// AddressSanitizer (so that it knows which stack runs) and to
// ThreadSanitizer (each fiber is a thread of its own to it, and a switch is
// no synchronisation).  A switch costs well under a microsecond, where
// waking an OS thread blocked at a barrier costs over ten on a small VM.
//
// Quiet, HappensBefore and HappensAfter speak to ThreadSanitizer and do
// nothing otherwise: inside a Quiet scope the sanitizer ignores memory
// accesses (the emulator's own bookkeeping, shared by all fibers), and a
// HappensBefore(addr) in one fiber orders what it did before what another
// does after a later HappensAfter(addr).

#ifndef TF_TRANSDUCER_CC_GPU_EMU_FIBER_H_
#define TF_TRANSDUCER_CC_GPU_EMU_FIBER_H_

#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                    size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save,
                                     const void** bottom_old, size_t* size_old);
}
#endif

#if defined(__SANITIZE_THREAD__)
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

namespace tf_transducer {
namespace gpu_emu {

#if defined(__SANITIZE_THREAD__)
struct Quiet {
  Quiet() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~Quiet() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;
};
inline void HappensBefore(void* addr) { __tsan_release(addr); }
inline void HappensAfter(void* addr) { __tsan_acquire(addr); }
#else
struct Quiet {
  Quiet() {}
};
inline void HappensBefore(void*) {}
inline void HappensAfter(void*) {}
#endif

// An execution context: the calling OS thread's own (Fiber::Current) or a
// new one with its own stack, which starts in entry() at its first switch.
class Fiber {
 public:
  // The context of the calling thread, to switch back to.
  static Fiber* Current() {
    Fiber* f = new Fiber();
#if defined(__SANITIZE_ADDRESS__)
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr;
      size_t size;
      pthread_attr_getstack(&attr, &addr, &size);
      f->bottom_ = addr;
      f->size_ = size;
      pthread_attr_destroy(&attr);
    }
#endif
#if defined(__SANITIZE_THREAD__)
    f->tsan_ = __tsan_get_current_fiber();
#endif
    return f;
  }

  // A fiber of `stack_bytes` (plus a guard page below) that runs entry().
  Fiber(void (*entry)(), size_t stack_bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_ = (stack_bytes + page - 1) / page * page;
    mapping_ = mmap(nullptr, size_ + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping_ == MAP_FAILED) {
      std::fprintf(stderr, "gpu_emu: cannot map a fiber stack of %zu bytes\n",
                   size_);
      std::_Exit(1);
    }
    mprotect(mapping_, page, PROT_NONE);  // overflow faults, not corrupts
    bottom_ = static_cast<char*>(mapping_) + page;
    getcontext(&context_);
    context_.uc_stack.ss_sp = bottom_;
    context_.uc_stack.ss_size = size_;
    context_.uc_link = nullptr;
    makecontext(&context_, entry, 0);
#if defined(__SANITIZE_THREAD__)
    tsan_ = __tsan_create_fiber(0);
#endif
  }

  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Switches from `from` (the running fiber) to `to`; returns when some
  // fiber switches back to `from`.
  static void Switch(Fiber* from, Fiber* to) {
#if defined(__SANITIZE_ADDRESS__)
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, to->bottom_, to->size_);
#endif
#if defined(__SANITIZE_THREAD__)
    __tsan_switch_to_fiber(to->tsan_, 1 /* __tsan_switch_to_fiber_no_sync */);
#endif
    swapcontext(&from->context_, &to->context_);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  }

  // The first thing a new fiber's entry() calls.
  static void Started() {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  }

 private:
  Fiber() = default;

  ucontext_t context_;
  void* mapping_ = nullptr;
  void* bottom_ = nullptr;
  size_t size_ = 0;
#if defined(__SANITIZE_THREAD__)
  void* tsan_ = nullptr;
#endif
};

}  // namespace gpu_emu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_GPU_EMU_FIBER_H_
