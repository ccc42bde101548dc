// SPDX-License-Identifier: Apache-2.0
// The CPU emulator's engine (cuda_runtime.h is its CUDA face): launches,
// block barriers, warp collectives, device memory and their misuse reports.
//
// A launch runs on the calling thread, its blocks one after another, each
// CUDA thread of a block a fiber (fiber.h) of a pool kept across launches.
// A thread runs until it returns or waits at a barrier or a warp
// collective; then the next runnable thread of the block runs: released
// ones and unstarted ones, in the order they became runnable.  Lazy
// schedule (the default): a fiber whose thread returns goes on with the next
// unstarted thread itself.  Eager schedule (the default under
// ThreadSanitizer): every thread of a block on a fiber of its own, so that
// the sanitizer, to which each fiber is a thread, sees any two of them race.
//
// Happens-before, as ThreadSanitizer is told it (fiber.h): a barrier orders
// what its threads did before it before what they do after it, __syncwarp
// the same for its lanes, a launch what the host did before it, and a
// block's end what its threads did before the next block and the host's next
// call.  Shuffles and votes order no memory.  Blocks of a launch are ordered
// too (they share the emulator's one copy of __shared__ variables), so races
// between blocks show only as results that depend on TT_GPU_EMU_ORDER.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_EMULATOR_H_
#define TF_TRANSDUCER_CC_GPU_EMU_EMULATOR_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cc/gpu_emu/fiber.h"

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};

// The running thread's coordinates, set at every switch to it.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};

namespace tf_transducer {
namespace gpu_emu {

// Limits of the GPUs the kernels are built for (sm_80 and later).
constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535u, 65535u};
constexpr unsigned kFullMask = 0xffffffffu;

// Prints a misuse report and exits with status 1 (the harness's failure).
[[noreturn]] inline void Fail(const char* format, ...) {
  std::fflush(stdout);
  std::fprintf(stderr, "gpu_emu: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::_Exit(1);
}

inline std::string Format(const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  return text;
}

// "0-15, 17" for the set bits of a mask.
inline std::string LaneList(unsigned mask) {
  std::string out;
  for (int lane = 0; lane < 32;) {
    if (!(mask >> lane & 1u)) {
      ++lane;
      continue;
    }
    int last = lane;
    while (last + 1 < 32 && (mask >> (last + 1) & 1u)) ++last;
    if (!out.empty()) out += ", ";
    out += last == lane ? std::to_string(lane)
                        : std::to_string(lane) + "-" + std::to_string(last);
    lane = last + 1;
  }
  return out.empty() ? "none" : out;
}

// A warp collective's lane-combining function: the last lane to arrive
// calls it with every participating lane's input and output (null for a
// lane outside `mask`).  It returns an error message, or "".
using Combine = std::string (*)(const void* const* in, void* const* out,
                                unsigned mask);

class Device {
 public:
  static Device& Get() {
    static Device* device = new Device();  // never destroyed
    return *device;
  }

  // ------------------------------------------------------------ launches
  int TakeLastError() {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    const int e = last_error_;
    last_error_ = 0;
    return e;
  }

  void SetLaunchError(const std::string& what, int error) {
    Quiet quiet;
    std::fprintf(stderr, "gpu_emu: %s\n", what.c_str());
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = error;
  }

  // Runs body() on every thread of every block of the grid.
  void Run(const char* kernel, dim3 grid, dim3 block,
           const std::function<void()>& body) {
    std::unique_lock<std::mutex> launch(launch_mu_);
    if (current_ >= 0) {
      Fail(
          "%s launched from inside kernel %s (dynamic parallelism is not "
          "emulated)",
          kernel, kernel_.load());
    }
    const int threads = int(block.x * block.y * block.z);
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
    const auto start = std::chrono::steady_clock::now();
    {
      Quiet quiet;
      host_.reset(Fiber::Current());
      waits_ = 0;
      kernel_ = kernel;
      body_ = &body;
      grid_ = grid;
      block_ = block;
      threads_.assign(threads, ThreadState{});
      warps_.assign((threads + 31) / 32, WarpState{});
    }
    std::vector<uint64_t> order(blocks);
    std::iota(order.begin(), order.end(), uint64_t(0));
    if (order_ == Order::kReverse) std::reverse(order.begin(), order.end());
    if (order_ == Order::kShuffle) {
      std::shuffle(order.begin(), order.end(), rng_);
    }
    for (uint64_t id : order) {
      HappensBefore(&launch_sync_);
      {
        Quiet quiet;
        StartBlock(id, threads);
        while (finished_ < active_) {
          if (ready_.empty()) Deadlock();
          SwitchToNext(host_.get());
        }
        FinishBlock();
      }
      HappensAfter(&done_sync_);
    }
    Quiet quiet;
    kernel_ = "";
    body_ = nullptr;
    if (profile_) {
      Profile& p = profiles_[kernel];
      p.launches += 1;
      p.blocks += blocks;
      p.threads += blocks * threads;
      p.waits += waits_;
      p.seconds += std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    }
  }

  // ----------------------------------------------------- block barriers
  // __syncthreads and its reductions, called at file:line: returns how many
  // of the block's live threads passed a non-zero predicate, and sets
  // *arrived to how many arrived.  Threads at different call sites are
  // reported (a barrier in code that not all of the block runs).
  int Barrier(const char* op, int predicate, int* arrived, const char* file,
              int line) {
    const int me = CurrentThread(op);
    // All live threads pass the same barriers: a thread's own count of them
    // names the barrier; two addresses alternate, so that a thread released
    // late cannot acquire what a fast one released at the next barrier.
    char* sync = &barrier_sync_[threads_[me].barriers % 2];
    HappensBefore(sync);
    {
      Quiet quiet;
      if (barrier_arrived_ == 0) {
        barrier_file_ = file;
        barrier_line_ = line;
      } else if (line != barrier_line_ || std::strcmp(file, barrier_file_)) {
        Fail("%s: thread %d is at %s (%s:%d) while threads wait at %s:%d: %s",
             Where().c_str(), me, op, file, line, barrier_file_, barrier_line_,
             States().c_str());
      }
      barrier_count_ += predicate != 0;
      ++barrier_arrived_;
      if (barrier_arrived_ == live_) {
        ReleaseBarrier();
      } else {
        threads_[me].wait = Wait::kBarrier;
        threads_[me].op = op;
        Block(me);
      }
      ++threads_[me].barriers;
      *arrived = threads_[me].result_arrived;
    }
    HappensAfter(sync);
    return threads_[me].result_count;
  }

  // ------------------------------------------------------ warp collectives
  // The calling lane's part of a collective of the lanes of `mask` in its
  // warp (see Combine); `out` is written before it returns.  `orders_memory`
  // (__syncwarp): what the lanes did before it happens before what they do
  // after it.
  void WarpCollective(const char* op, unsigned mask, Combine combine,
                      const void* in, void* out, bool orders_memory) {
    const int me = CurrentThread(op);
    char* sync = &warp_sync_[me / 32];
    if (orders_memory) HappensBefore(sync);
    {
      Quiet quiet;
      Arrive(me, op, mask, combine, in, out);
    }
    if (orders_memory) HappensAfter(sync);
  }

  // A call that all lanes of a warp must make alike (a wmma load or store):
  // the calling lane's n-th such call must match its warp's n-th, the first
  // lane's to get there.  No lane waits for the others.
  void WarpUniformCall(const char* op, const void* ptr, unsigned ldm,
                       int layout) {
    const int me = CurrentThread(op);
    Quiet quiet;
    std::vector<UniformCall>& calls = warps_[me / 32].uniform;
    const size_t n = threads_[me].uniform_calls++;
    const UniformCall call{op, ptr, ldm, layout};
    if (n == calls.size()) {
      calls.push_back(call);
      return;
    }
    const UniformCall& first = calls[n];
    if (std::strcmp(first.op, op) != 0 || first.ptr != ptr ||
        first.ldm != ldm || first.layout != layout) {
      Fail(
          "%s: lane %d of warp %d calls %s(%p, ldm %u, layout %d) where "
          "another lane's call %zu was %s(%p, ldm %u, layout %d)",
          Where().c_str(), me % 32, me / 32, op, ptr, ldm, layout, n, first.op,
          first.ptr, first.ldm, first.layout);
    }
  }

  // ------------------------------------------------------------- memory
  // Allocations of exactly `bytes` bytes, 256-byte aligned as cudaMalloc's,
  // filled with 0xff.
  void* Malloc(size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, bytes) != 0) return nullptr;
    std::memset(p, 0xff, bytes);
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    allocations_[reinterpret_cast<uintptr_t>(p)] = bytes;
    allocated_ += bytes;
    return p;
  }

  bool Free(void* ptr) {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end()) {
      std::fprintf(stderr,
                   "gpu_emu: cudaFree(%p): not the start of a device "
                   "allocation\n",
                   ptr);
      return false;
    }
    allocated_ -= it->second;
    allocations_.erase(it);
    std::free(ptr);
    return true;
  }

  // Whether [ptr, ptr + bytes) lies in one device allocation; prints why
  // not, naming `call` and `which` pointer.
  bool InDeviceMemory(const void* ptr, size_t bytes, const char* call,
                      const char* which) {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = allocations_.upper_bound(p);
    if (it != allocations_.begin()) {
      --it;
      if (p >= it->first && p + bytes <= it->first + it->second) return true;
      if (p >= it->first && p < it->first + it->second) {
        std::fprintf(stderr,
                     "gpu_emu: %s: %s %p + %zu bytes runs past the end of "
                     "its allocation of %zu bytes\n",
                     call, which, ptr, bytes, it->second);
        return false;
      }
    }
    std::fprintf(stderr, "gpu_emu: %s: %s %p is not device memory\n", call,
                 which, ptr);
    return false;
  }

  size_t allocated() {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
  }

  // -------------------------------------------------------------- streams
  // Streams are tokens: work runs when it is enqueued.
  bool IsStream(const void* stream, const char* call) {
    if (stream == nullptr) return true;
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.count(stream)) return true;
    std::fprintf(stderr, "gpu_emu: %s: stream %p was not created\n", call,
                 stream);
    return false;
  }
  void AddStream(const void* s) {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    streams_.insert(s);
  }
  bool RemoveStream(const void* s) {
    Quiet quiet;
    std::lock_guard<std::mutex> lock(mu_);
    return streams_.erase(s) == 1;
  }

 private:
  enum class Order { kForward, kReverse, kShuffle };
  enum class Wait { kUnstarted, kRunning, kReady, kBarrier, kWarp, kExited };

  struct ThreadState {
    Wait wait = Wait::kUnstarted;
    const char* op = nullptr;
    unsigned mask = 0;
    int fiber = -1;                            // the fiber that runs it
    uint64_t barriers = 0;                     // barriers passed
    size_t uniform_calls = 0;                  // WarpUniformCall's made
    int result_count = 0, result_arrived = 0;  // of its last barrier
  };

  struct UniformCall {
    const char* op;
    const void* ptr;
    unsigned ldm;
    int layout;
  };

  struct WarpState {
    std::vector<UniformCall> uniform;  // WarpUniformCall's, in order
    unsigned present = 0;              // lanes the block has
    unsigned exited = 0;               // lanes that returned
    unsigned mask = 0;  // the pending collective's lanes (0: none)
    unsigned arrived = 0;
    const char* op = nullptr;
    Combine combine = nullptr;
    const void* in[32] = {};
    void* out[32] = {};
  };

  // TT_GPU_EMU_PROFILE=1: per kernel, printed at exit.
  struct Profile {
    uint64_t launches = 0, blocks = 0, threads = 0, waits = 0;
    double seconds = 0;
  };

  Device() {
    const std::string order = Env("TT_GPU_EMU_ORDER", "forward");
    if (order == "forward") {
      order_ = Order::kForward;
    } else if (order == "reverse") {
      order_ = Order::kReverse;
    } else if (order.rfind("shuffle", 0) == 0 &&
               (order.size() == 7 || order[7] == ':')) {
      order_ = Order::kShuffle;
      rng_.seed(order.size() > 8 ? std::strtoull(order.c_str() + 8, nullptr, 10)
                                 : 1);
    } else {
      Fail(
          "TT_GPU_EMU_ORDER must be forward, reverse or shuffle[:SEED], got "
          "'%s'",
          order.c_str());
    }
#if defined(__SANITIZE_THREAD__)
    const char* default_schedule = "eager";
#else
    const char* default_schedule = "lazy";
#endif
    const std::string schedule = Env("TT_GPU_EMU_SCHEDULE", default_schedule);
    if (schedule != "lazy" && schedule != "eager") {
      Fail("TT_GPU_EMU_SCHEDULE must be lazy or eager, got '%s'",
           schedule.c_str());
    }
    eager_ = schedule == "eager";
    timeout_s_ = Number("TT_GPU_EMU_TIMEOUT_S", "600");
    stack_bytes_ = size_t(Number("TT_GPU_EMU_STACK_KB", "256") * 1024);
    profile_ = Env("TT_GPU_EMU_PROFILE", "0") != "0";
    if (profile_) std::atexit([] { Get().PrintProfile(); });
    std::thread([this] { Watch(); }).detach();
  }

  static std::string Env(const char* name, const char* fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : fallback;
  }

  static double Number(const char* name, const char* fallback) {
    const std::string text = Env(name, fallback);
    char* end;
    const double value = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(value > 0)) {
      Fail("%s must be a positive number, got '%s'", name, text.c_str());
    }
    return value;
  }

  // Reports a launch that makes no progress: a thread that neither
  // returns nor waits (it cannot be switched away from).
  void Watch() {
    uint64_t last = progress_.load();
    double still = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const uint64_t now = progress_.load();
      const char* kernel = kernel_.load();
      still = now == last && *kernel != '\0' ? still + 1 : 0;
      last = now;
      if (still > timeout_s_) {
        Fail(
            "kernel %s, thread %d: no thread switched for %.0f s (a loop "
            "that never reaches a barrier?  TT_GPU_EMU_TIMEOUT_S)",
            kernel, running_thread_.load(), still);
      }
    }
  }

  void PrintProfile() {
    std::vector<std::pair<std::string, Profile>> rows(profiles_.begin(),
                                                      profiles_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return a.second.seconds > b.second.seconds;
    });
    std::fprintf(stderr,
                 "gpu_emu profile: seconds launches blocks threads waits "
                 "kernel\n");
    for (const auto& [name, p] : rows) {
      std::fprintf(stderr, "%8.2f %8llu %9llu %11llu %11llu %s\n", p.seconds,
                   (unsigned long long)p.launches, (unsigned long long)p.blocks,
                   (unsigned long long)p.threads, (unsigned long long)p.waits,
                   name.c_str());
    }
  }

  // The calling thread's index in its block; fails outside a kernel.
  int CurrentThread(const char* op) const {
    if (current_ < 0) Fail("%s called outside a kernel", op);
    return current_;
  }

  std::string Where() const {
    return Format(
        "kernel %s, block (%u, %u, %u) of (%u, %u, %u), %u x %u x %u threads",
        kernel_.load(), block_idx_.x, block_idx_.y, block_idx_.z, grid_.x,
        grid_.y, grid_.z, block_.x, block_.y, block_.z);
  }

  // Block `id` of the launch, its `threads` threads runnable.
  void StartBlock(uint64_t id, int threads) {
    block_idx_ = uint3{unsigned(id % grid_.x), unsigned(id / grid_.x % grid_.y),
                       unsigned(id / (uint64_t(grid_.x) * grid_.y))};
    for (int w = 0; w < int(warps_.size()); ++w) {
      warps_[w] = WarpState{};
      const int lanes = std::min(32, threads - 32 * w);
      warps_[w].present = lanes == 32 ? kFullMask : (1u << lanes) - 1u;
    }
    std::fill(threads_.begin(), threads_.end(), ThreadState{});
    active_ = live_ = threads;
    finished_ = 0;
    barrier_arrived_ = barrier_count_ = 0;
    ready_.resize(threads);
    std::iota(ready_.begin(), ready_.end(), 0);
  }

  // The block's fibers back to the pool.
  void FinishBlock() {
    for (int f : used_) free_.push_back(f);
    used_.clear();
  }

  // Runs the first runnable thread (taken off the queue) on its fiber,
  // given one from the pool if it has none: switches from `from`, the
  // running fiber, unless it is that fiber.
  void SwitchToNext(Fiber* from) {
    const int t = ready_.front();
    ready_.pop_front();
    ThreadState& s = threads_[t];
    if (s.fiber < 0) {
      if (free_.empty()) {
        free_.push_back(int(fibers_.size()));
        fibers_.push_back(std::make_unique<Fiber>(&FiberMain, stack_bytes_));
      }
      s.fiber = free_.back();
      free_.pop_back();
      used_.push_back(s.fiber);
    }
    s.wait = Wait::kRunning;
    threadIdx = uint3{unsigned(t % block_.x), unsigned(t / block_.x % block_.y),
                      unsigned(t / (block_.x * block_.y))};
    blockIdx = block_idx_;
    blockDim = block_;
    gridDim = grid_;
    current_ = t;
    running_thread_ = t;
    ++progress_;
    Fiber* to = fibers_[s.fiber].get();
    if (to != from) Fiber::Switch(from, to);
  }

  // A fiber's life: the thread it is switched to (current_), then, after
  // that returns, the next one it is given.
  static void FiberMain() {
    Fiber::Started();
    Device& d = Get();
    for (;;) {
      const int t = d.current_;
      HappensAfter(&d.launch_sync_);
      (*d.body_)();
      HappensBefore(&d.done_sync_);
      Quiet quiet;
      d.Exit(t);
    }
  }

  // Thread `me` returned from the kernel.  Its fiber goes on with the next
  // unstarted thread (lazy schedule) or switches to the next runnable one
  // (or to the host when none is); this returns when the fiber is given a
  // thread again.
  void Exit(int me) {
    threads_[me].wait = Wait::kExited;
    current_ = -1;
    --live_;
    ++finished_;
    WarpState& w = warps_[me / 32];
    const unsigned bit = 1u << (me % 32);
    w.exited |= bit;
    if (w.mask & bit) {
      Fail(
          "%s: lane %d of warp %d returned while lanes %s wait for it at "
          "%s(mask 0x%08x)",
          Where().c_str(), me % 32, me / 32, LaneList(w.arrived).c_str(), w.op,
          w.mask);
    }
    // The others may have waited for this thread alone.
    if (barrier_arrived_ > 0 && barrier_arrived_ == live_) ReleaseBarrier();
    const int fiber = threads_[me].fiber;
    Fiber* self = fibers_[fiber].get();
    if (!eager_) {  // free for the block's unstarted threads (itself first)
      used_.erase(std::find(used_.begin(), used_.end(), fiber));
      free_.push_back(fiber);
    }
    if (ready_.empty()) {
      ++progress_;
      Fiber::Switch(self, host_.get());
    } else {
      SwitchToNext(self);
    }
  }

  // Thread `me` waits; returns when it is released and runs again.
  void Block(int me) {
    ++waits_;
    // Every live thread waits (none is runnable): nothing can release it.
    if (ready_.empty()) Deadlock();
    SwitchToNext(fibers_[threads_[me].fiber].get());
  }

  // Queues thread t, waiting, to run again.
  void Release(int t) {
    threads_[t].wait = Wait::kReady;
    ready_.push_back(t);
  }

  // The block barrier is complete: every thread at it gets the result, and
  // the waiting ones are released.
  void ReleaseBarrier() {
    for (int t = 0; t < active_; ++t) {
      const Wait wait = threads_[t].wait;
      if (wait == Wait::kBarrier || wait == Wait::kRunning) {
        threads_[t].result_count = barrier_count_;
        threads_[t].result_arrived = barrier_arrived_;
        if (wait == Wait::kBarrier) Release(t);
      }
    }
    barrier_arrived_ = 0;
    barrier_count_ = 0;
  }

  // The calling lane's arrival at a warp collective; returns once the
  // collective is complete.
  void Arrive(int me, const char* op, unsigned mask, Combine combine,
              const void* in, void* out) {
    const int lane = me % 32, warp = me / 32;
    WarpState& w = warps_[warp];
    const unsigned bit = 1u << lane;
    if (!(mask & bit)) {
      Fail(
          "%s: lane %d of warp %d calls %s with mask 0x%08x, which leaves "
          "it out",
          Where().c_str(), lane, warp, op, mask);
    }
    if (mask & ~w.present) {
      Fail(
          "%s: %s(mask 0x%08x) in warp %d names lanes %s, which a block of "
          "%d threads does not have",
          Where().c_str(), op, mask, warp, LaneList(mask & ~w.present).c_str(),
          active_);
    }
    if (mask & w.exited) {
      Fail(
          "%s: %s(mask 0x%08x) in warp %d (called by lane %d) names exited "
          "lanes %s",
          Where().c_str(), op, mask, warp, lane,
          LaneList(mask & w.exited).c_str());
    }
    if (w.mask == 0) {
      w.mask = mask;
      w.op = op;
      w.combine = combine;
      w.arrived = 0;
    } else if (w.mask != mask || w.combine != combine ||
               std::strcmp(w.op, op) != 0) {
      Fail(
          "%s: warp %d: lane %d is at %s(mask 0x%08x) while lanes %s wait "
          "at %s(mask 0x%08x)",
          Where().c_str(), warp, lane, op, mask, LaneList(w.arrived).c_str(),
          w.op, w.mask);
    }
    w.in[lane] = in;
    w.out[lane] = out;
    w.arrived |= bit;
    if (w.arrived != w.mask) {
      threads_[me].wait = Wait::kWarp;
      threads_[me].op = op;
      threads_[me].mask = mask;
      Block(me);
      return;
    }
    const std::string error = w.combine(w.in, w.out, w.mask);
    if (!error.empty()) {
      Fail("%s: %s(mask 0x%08x) in warp %d: %s", Where().c_str(), w.op, w.mask,
           warp, error.c_str());
    }
    w.mask = 0;
    w.arrived = 0;
    w.combine = nullptr;
    for (int l = 0; l < 32; ++l) {
      w.in[l] = nullptr;
      w.out[l] = nullptr;
      if ((mask >> l & 1u) && l != lane) Release(32 * warp + l);
    }
  }

  // No thread is runnable, and some have not returned.
  [[noreturn]] void Deadlock() {
    Fail("%s: deadlock: every live thread waits: %s", Where().c_str(),
         States().c_str());
  }

  // What a thread is doing, as States() names it.
  static std::string Doing(const ThreadState& s) {
    if (s.wait == Wait::kBarrier) return std::string("at ") + s.op;
    if (s.wait == Wait::kWarp) {
      return Format("at %s(mask 0x%08x)", s.op, s.mask);
    }
    // In the order of Wait: kUnstarted, kRunning, kReady, (kBarrier,
    // kWarp,) kExited.
    static const char* const kNames[] = {
        "not started", "running", "released", "", "", "exited"};
    return kNames[static_cast<int>(s.wait)];
  }

  // "warp 0: lanes 0-15 at __syncthreads, lanes 16-31 at
  // __shfl_xor_sync(mask 0xffffffff); warp 1: lanes 0-31 exited"
  std::string States() const {
    std::string out;
    for (size_t w = 0; w < warps_.size(); ++w) {
      std::map<std::string, unsigned> groups;
      for (int lane = 0; lane < 32; ++lane) {
        const size_t t = 32 * w + lane;
        if (t >= threads_.size()) break;
        groups[Doing(threads_[t])] |= 1u << lane;
      }
      out += Format("%swarp %zu:", w ? "; " : "", w);
      bool first = true;
      for (const auto& [what, lanes] : groups) {
        out += Format("%s lanes %s %s", first ? "" : ",",
                      LaneList(lanes).c_str(), what.c_str());
        first = false;
      }
    }
    return out;
  }

  std::mutex mu_;         // memory, streams, errors (any host thread)
  std::mutex launch_mu_;  // one launch at a time
  Order order_ = Order::kForward;
  bool eager_ = false;
  std::mt19937_64 rng_;
  double timeout_s_ = 600;
  size_t stack_bytes_ = 256 << 10;
  int last_error_ = 0;
  bool profile_ = false;
  std::map<std::string, Profile> profiles_;
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> running_thread_{-1};

  // The launch and block that run (on the launching thread and its fibers).
  std::unique_ptr<Fiber> host_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<int> free_, used_;  // fibers free, and used by this block
  std::atomic<const char*> kernel_{""};
  const std::function<void()>* body_ = nullptr;
  dim3 grid_, block_;
  uint3 block_idx_{0, 0, 0};
  int active_ = 0, live_ = 0, finished_ = 0;
  std::deque<int> ready_;  // runnable threads, in the order they became so
  int current_ = -1;       // the running thread (-1: none)
  uint64_t waits_ = 0;     // of this launch
  std::vector<ThreadState> threads_;
  std::vector<WarpState> warps_;
  int barrier_arrived_ = 0, barrier_count_ = 0;
  const char* barrier_file_ = "";
  int barrier_line_ = 0;

  // Addresses that only carry happens-before edges (ThreadSanitizer).
  char launch_sync_ = 0, done_sync_ = 0;
  char barrier_sync_[2] = {};
  char warp_sync_[32] = {};

  std::map<uintptr_t, size_t> allocations_;
  size_t allocated_ = 0;
  std::set<const void*> streams_;
};

}  // namespace gpu_emu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_GPU_EMU_EMULATOR_H_
