// The shim's launcher: runs a kernel's grid on the CPU, block after block, each block's
// threads as fibers on the launching thread that meet at every `__syncthreads()` (see shim.h
// for why this is exact). Every misuse the GPU would not report reliably (a block over 1024
// threads, an empty grid, threads meeting at different barriers) aborts with a message naming
// the kernel.
//
// Fibers, not OS threads: a barrier is n context switches on one core, not n futex wake-ups
// across cores. Each fiber has its own stack, kept for the life of the process and reused by
// every launch, with a guard page below it.
#include "shim.h"

#include <sys/mman.h>
#include <unistd.h>

// SHIM_UCONTEXT (a -D flag) selects the portable switch on x86-64 too, to test it there.
#if defined(__x86_64__) && !defined(SHIM_UCONTEXT)
#define SHIM_STACK_SWAP 1
#else
#include <ucontext.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace shim {
namespace {

// Which barrier a fiber stopped at: its count of barriers so far and the source file and
// line of the `__syncthreads()`, or kEnd for the end of the block. The file matters because a
// kernel's program is kernels/common.cuh followed by its own file, whose lines overlap.
constexpr int kEnd = -1;
struct Tag {
    unsigned long long count;
    const char* file;
    int line;
    bool operator==(const Tag& o) const {
        return count == o.count && line == o.line && std::strcmp(file, o.file) == 0;
    }
};

// Kernel locals are a few small arrays (SCAN_MAX_N floats), far under this.
constexpr size_t kStack = 256 * 1024;

[[noreturn]] void fail(const char* what) {
    fprintf(stderr, "shim: %s: %s\n", what, strerror(errno));
    abort();
}

// A saved execution context, and the switch between two. On x86-64 a switch saves the
// callee-saved registers on the old stack and swaps stack pointers (a few nanoseconds);
// ucontext's swapcontext would also save the signal mask, a system call per switch. The
// floating-point control state is not switched: every fiber runs on the same OS thread, and
// no kernel changes it.
#if defined(SHIM_STACK_SWAP)
extern "C" void shim_switch(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl shim_switch
    .type shim_switch, @function
shim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size shim_switch, .-shim_switch
)");

struct Context {
    void* sp = nullptr;
};

void jump(Context& from, Context& to) { shim_switch(&from.sp, to.sp); }

// Makes `c` start `entry` on the stack [stack, stack + size) at its next jump: the six
// registers shim_switch pops (zeros), then `entry` as its return address, above it a zero
// return address for `entry` itself, so that `entry` starts with the stack aligned as
// after a call.
void start(Context& c, char* stack, size_t size, void (*entry)()) {
    auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t{15};
    auto* sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(entry);
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    c.sp = sp;
}
#else
struct Context {
    ucontext_t uc;
};

void jump(Context& from, Context& to) {
    if (swapcontext(&from.uc, &to.uc) != 0) fail("swapcontext");
}

void start(Context& c, char* stack, size_t size, void (*entry)()) {
    if (getcontext(&c.uc) != 0) fail("getcontext");
    c.uc.uc_stack = {stack, 0, size};
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
#endif

struct Fiber {
    Context ctx;
    char* stack;
    Tag tag;
};

// The launch in progress on this OS thread: the kernel, the thread now running (its fiber is
// fiber_pool()'s) and the scheduler's context each fiber returns to at a barrier or its end.
struct Launch {
    const char* name;
    void (*body)(void*);
    void* ctx;
    unsigned running;  // the fiber now executing
    Context sched;
};

thread_local Launch* current = nullptr;

// One launch at a time in the process: the kernels' `__shared__` arrays are static, and the
// fibers and their stacks are shared by every launch.
std::mutex launch_lock;

// Grows only, under launch_lock; never freed (the process's lifetime).
std::vector<Fiber*>& fiber_pool() {
    static auto* pool = new std::vector<Fiber*>;
    return *pool;
}

Fiber* new_fiber() {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* base = mmap(nullptr, kStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) fail("mmap of a fiber stack");
    // A stack overflow hits the guard page (a fault) instead of the neighbouring stack.
    if (mprotect(base, page, PROT_NONE) != 0) fail("mprotect of a fiber's guard page");
    auto* f = new Fiber{};
    f->stack = static_cast<char*>(base) + page;
    return f;
}

void describe(const Tag& t, char* out, size_t len) {
    if (t.line == kEnd) {
        snprintf(out, len, "the end of the block after %llu barriers", t.count);
    } else {
        snprintf(out, len, "barrier %llu (%s:%d)", t.count, t.file, t.line);
    }
}

// After every fiber of the block has stopped: all must have stopped at the same barrier.
void check(const Launch& l, unsigned n) {
    const std::vector<Fiber*>& f = fiber_pool();
    const Tag& first = f[0]->tag;
    for (unsigned i = 1; i < n; ++i) {
        if (!(f[i]->tag == first)) {
            char a[320], b[320];
            describe(first, a, sizeof a);
            describe(f[i]->tag, b, sizeof b);
            fprintf(stderr, "shim: kernel %s: threads of block (%u, %u, %u) met at different barriers: thread 0 at %s, thread %u at %s\n",
                    l.name, blockIdx.x, blockIdx.y, blockIdx.z, a, i, b);
            abort();
        }
    }
}

// A fiber's entry: the kernel body for thread `running`, then its end tag and back to the
// scheduler, which never resumes it (the next block starts it afresh).
[[noreturn]] void fiber_main() {
    Launch& l = *current;
    Fiber& f = *fiber_pool()[l.running];
    l.body(l.ctx);
    f.tag = {f.tag.count, "", kEnd};
    jump(f.ctx, l.sched);
    fprintf(stderr, "shim: kernel %s: a finished thread was resumed\n", l.name);
    abort();
}

// Runs one block: every fiber from its start, phase after phase, until all reach the end.
// Within a phase the fibers run one after another, in increasing thread index in even blocks
// and decreasing in odd ones, so that a read of shared memory another thread writes in the
// same phase (a race on a GPU) sees the write in some blocks and not in others, and a result
// that depends on it differs from the CPU backend's.
void run_block(Launch& l, unsigned n, Dim dims, bool reverse) {
    std::vector<Fiber*>& fibers = fiber_pool();
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = *fibers[i];
        f.tag = {0, "", 0};
        start(f.ctx, f.stack, kStack, fiber_main);
    }
    for (;;) {
        for (unsigned k = 0; k < n; ++k) {
            unsigned i = reverse ? n - 1 - k : k;
            threadIdx = {i % dims.x, i / dims.x % dims.y, i / (dims.x * dims.y)};
            l.running = i;
            jump(l.sched, fibers[i]->ctx);
        }
        check(l, n);
        if (fibers[0]->tag.line == kEnd) return;
    }
}

[[noreturn]] void refuse(const char* name, const char* why, Dim d) {
    fprintf(stderr, "shim: kernel %s: refused launch: %s (%u, %u, %u)\n", name, why, d.x, d.y, d.z);
    abort();
}

// CUDA's limits (compute capability 8.0 and 9.0 alike).
void validate(const char* name, Dim grid, Dim block) {
    unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) refuse(name, "empty grid or block", threads ? grid : block);
    if (threads > 1024) refuse(name, "more than 1024 threads per block", block);
    if (block.z > 64) refuse(name, "block z over 64", block);
    if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) refuse(name, "grid over CUDA's limits", grid);
}

}  // namespace

void sync_threads(const char* file, int line) {
    Launch* l = current;
    if (l == nullptr) {
        fprintf(stderr, "shim: __syncthreads() outside a launch\n");
        abort();
    }
    Fiber& f = *fiber_pool()[l->running];
    f.tag = {f.tag.count + 1, file, line};
    jump(f.ctx, l->sched);
}

void launch_impl(const char* name, Dim grid, Dim block, void (*body)(void*), void* ctx) {
    validate(name, grid, block);
    // Before the lock, which this thread would already hold.
    if (current != nullptr) {
        fprintf(stderr, "shim: kernel %s: launched from inside kernel %s\n", name, current->name);
        abort();
    }
    std::lock_guard<std::mutex> guard(launch_lock);
    unsigned n = block.x * block.y * block.z;
    std::vector<Fiber*>& fibers = fiber_pool();
    while (fibers.size() < n) fibers.push_back(new_fiber());
    Launch l{name, body, ctx, 0, {}};
    current = &l;
    blockDim = dim3(block.x, block.y, block.z);
    gridDim = dim3(grid.x, grid.y, grid.z);
    unsigned long long b = 0;
    for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
            for (unsigned x = 0; x < grid.x; ++x, ++b) {
                blockIdx = {x, y, z};
                run_block(l, n, block, b % 2 == 1);
            }
        }
    }
    current = nullptr;
}

}  // namespace shim
