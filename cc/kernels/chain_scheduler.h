// SPDX-License-Identifier: Apache-2.0
// A pipelined wavefront without barriers.
//
// Work comes as `chains` chains of `steps` steps each.  Steps of one chain
// run in order; chains form groups of `group` consecutive chains, and step i
// of a chain that is not the first of its group may only start after step i
// of the chain before it has finished.  (For the MI recursion a chain is one
// band of s of one sequence and a step one range of diagonals: tile (kb, sb)
// then runs after (kb - 1, sb) and (kb, sb - 1), which is what it needs.)
//
// Every worker scans the chains for one whose next step is ready, claims it
// and runs that step.  A worker never waits for good on a step that no one
// runs: after a while it runs any ready step itself.  So the schedule
// finishes with any number of workers, including one, and never deadlocks
// when the thread pool runs fewer workers at a time than were asked for.

#ifndef TF_TRANSDUCER_CC_KERNELS_CHAIN_SCHEDULER_H_
#define TF_TRANSDUCER_CC_KERNELS_CHAIN_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace tf_transducer {

class ChainScheduler {
 public:
  ChainScheduler(int64_t chains, int64_t group, int64_t steps)
      : chains_(chains),
        group_(group),
        steps_(steps),
        done_(new std::atomic<int64_t>[chains]),
        busy_(new std::atomic<bool>[chains]) {
    for (int64_t c = 0; c < chains; ++c) {
      done_[c].store(0, std::memory_order_relaxed);
      busy_[c].store(false, std::memory_order_relaxed);
    }
  }

  // The body of worker `worker` of `workers`: returns when every step of
  // every chain is done.  `run_step(chain, step)` does the work.  A worker
  // keeps to its own chains (c % workers == worker), so that a band's data
  // stays in one core's cache, and takes other chains only after its own
  // have had nothing ready for a while: that is what keeps the schedule
  // finishing when some workers never get a thread.
  template <typename Fn>
  void Work(int worker, int workers, const Fn& run_step) {
    int idle = 0;
    while (finished_.load(std::memory_order_acquire) < chains_) {
      const bool steal = idle >= kIdleRoundsBeforeStealing;
      bool progressed = false;
      for (int64_t c = 0; c < chains_; ++c) {
        if (!steal && c % workers != worker) continue;
        progressed |= TryStep(c, run_step);
      }
      if (progressed) {
        idle = 0;
      } else {
        ++idle;
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kIdleRoundsBeforeStealing = 32;

  // Runs the next step of chain c if it is ready and no one else runs it.
  template <typename Fn>
  bool TryStep(int64_t c, const Fn& run_step) {
    if (!Ready(c)) return false;
    bool expected = false;
    if (!busy_[c].compare_exchange_strong(expected, true,
                                          std::memory_order_acq_rel)) {
      return false;
    }
    bool ran = false;
    if (Ready(c)) {  // Still ready now that this worker owns the chain.
      const int64_t step = done_[c].load(std::memory_order_acquire);
      run_step(c, step);
      done_[c].store(step + 1, std::memory_order_release);
      if (step + 1 == steps_) finished_.fetch_add(1, std::memory_order_acq_rel);
      ran = true;
    }
    busy_[c].store(false, std::memory_order_release);
    return ran;
  }

  bool Ready(int64_t c) const {
    const int64_t next = done_[c].load(std::memory_order_acquire);
    if (next >= steps_) return false;
    return c % group_ == 0 ||
           done_[c - 1].load(std::memory_order_acquire) > next;
  }

  const int64_t chains_, group_, steps_;
  std::unique_ptr<std::atomic<int64_t>[]> done_;
  std::unique_ptr<std::atomic<bool>[]> busy_;
  std::atomic<int64_t> finished_{0};
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_CHAIN_SCHEDULER_H_
