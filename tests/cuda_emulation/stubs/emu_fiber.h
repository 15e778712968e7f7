// Fibers for the emulated threads of a block (tests/cuda_emulation/stubs/emu_block.h): each
// CUDA thread runs on its own stack, switched by the block's scheduler at barriers, so the
// emulator picks the interleaving (seeded) instead of the OS, and no OS thread is started per
// block. x86-64: a 20-instruction switch of the callee-saved registers; elsewhere ucontext.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

#if defined(__x86_64__)
// emu_fiber_switch(&save_sp, load_sp): saves rbp, rbx, r12-r15, MXCSR and the x87 control
// word on the current stack, stores rsp in *save_sp, loads load_sp and restores the same.
// Weak, so every translation unit may carry the definition.
asm(R"(
  .text
  .weak emu_fiber_switch
  .type emu_fiber_switch,@function
emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_fiber_switch, .-emu_fiber_switch
)");
extern "C" void emu_fiber_switch(void** save_sp, void* load_sp);
#endif

// A stack with a guard page below it (an overflow faults instead of corrupting a neighbour).
struct FiberStack {
  static constexpr size_t kBytes = size_t(256) << 10, kGuard = 4096;
  char* base = nullptr;
  FiberStack() {
    void* m = mmap(nullptr, kBytes + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { std::perror("[cuda emulator] fiber stack"); std::abort(); }
    mprotect(m, kGuard, PROT_NONE);
    base = static_cast<char*>(m);
  }
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  ~FiberStack() { munmap(base, kBytes + kGuard); }
  char* top() const { return base + kGuard + kBytes; }
};
inline std::vector<FiberStack*>& stack_pool() {  // kept for the process: blocks reuse them
  static std::vector<FiberStack*> pool;
  return pool;
}
inline FiberStack& stack_for(size_t i) {
  auto& pool = stack_pool();
  while (pool.size() <= i) pool.push_back(new FiberStack());
  return *pool[i];
}

// One fiber: start(entry) prepares it to run entry() on stack `i`; resume() runs it until it
// calls yield_to_scheduler(); entry must never return (it yields for the last time instead).
struct Fiber {
#if defined(__x86_64__)
  void* sp = nullptr;
  void* scheduler_sp = nullptr;
  void start(size_t i, void (*entry)()) {
    char* top = stack_for(i).top();
    void** frame = reinterpret_cast<void**>(top - 72);  // see emu_fiber_switch's pops
    unsigned control[2] = {0x1F80u, 0x037Fu};            // MXCSR default, x87 control default
    __builtin_memcpy(frame, control, 8);
    for (int r = 1; r <= 6; ++r) frame[r] = nullptr;     // r15 .. rbp
    frame[7] = reinterpret_cast<void*>(entry);           // `ret` enters entry()
    frame[8] = nullptr;                                  // entry's (never used) return address
    sp = frame;
  }
  void resume() { emu_fiber_switch(&scheduler_sp, sp); }
  void yield_to_scheduler() { emu_fiber_switch(&sp, scheduler_sp); }
#else
  ucontext_t ctx{}, scheduler{};
  void start(size_t i, void (*entry)()) {
    FiberStack& s = stack_for(i);
    getcontext(&ctx);
    ctx.uc_stack.ss_sp = s.base + FiberStack::kGuard;
    ctx.uc_stack.ss_size = FiberStack::kBytes;
    ctx.uc_link = nullptr;
    makecontext(&ctx, entry, 0);
  }
  void resume() { swapcontext(&scheduler, &ctx); }
  void yield_to_scheduler() { swapcontext(&ctx, &scheduler); }
#endif
};

}  // namespace emu
