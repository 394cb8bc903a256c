// The shim's launcher: runs a kernel's grid on the CPU, block after block, each block's
// threads as concurrent OS threads meeting at a std::barrier (see shim.h for why this is
// exact). Every misuse the GPU would not report reliably (a block over 1024 threads, an empty
// grid, threads meeting at different barriers) aborts with a message naming the kernel.
//
// The OS threads are a pool kept for the life of the process: creating and joining up to 1024
// threads per launch cost far more than most kernels' work. Worker i is always thread i of the
// block; it sleeps on its own semaphore, and a launch of n threads wakes exactly workers
// 0..n-1 (the rest stay asleep), which run the whole grid as before and report back; the
// launch returns once all n have.
#include "shim.h"

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

namespace shim {
namespace {

// Which barrier a thread arrived at: its count of barriers so far and the source file and
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

struct Block;

// The barrier's completion step, run once per phase after every thread has arrived and
// before any is released: all threads must have arrived at the same barrier.
struct Check {
    Block* block;
    void operator()() noexcept;
};

// One launch's shared state: the barrier and each thread's tag for the current phase.
struct Block {
    const char* name;
    std::vector<Tag> tags;
    std::barrier<Check> barrier;
    Block(const char* kernel, unsigned threads) : name(kernel), tags(threads), barrier(threads, Check{this}) {}
};

void describe(const Tag& t, char* out, size_t len) {
    if (t.line == kEnd) {
        snprintf(out, len, "the end of the block after %llu barriers", t.count);
    } else {
        snprintf(out, len, "barrier %llu (%s:%d)", t.count, t.file, t.line);
    }
}

void Check::operator()() noexcept {
    const Tag& first = block->tags[0];
    for (size_t i = 1; i < block->tags.size(); ++i) {
        if (!(block->tags[i] == first)) {
            char a[320], b[320];
            describe(first, a, sizeof a);
            describe(block->tags[i], b, sizeof b);
            fprintf(stderr, "shim: kernel %s: threads of block (%u, %u, %u) met at different barriers: thread 0 at %s, thread %zu at %s\n",
                    block->name, blockIdx.x, blockIdx.y, blockIdx.z, a, i, b);
            abort();
        }
    }
}

thread_local Block* current = nullptr;
thread_local unsigned my_tid = 0;
thread_local unsigned long long my_count = 0;

void arrive(Tag t) {
    current->tags[my_tid] = t;
    current->barrier.arrive_and_wait();
}

// One launch at a time in the process: the kernels' `__shared__` arrays are static.
std::mutex launch_lock;

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

// One OS thread of the block: every block of the grid in order, meeting the other threads
// at the end of each so that no thread starts a block before all have finished the last.
// Sets (and so resets, for a pooled worker) every thread-local of the launch.
void run_thread(Block* block, unsigned tid, Dim grid, Dim dims, void (*body)(void*), void* ctx) {
    current = block;
    my_tid = tid;
    threadIdx = {tid % dims.x, tid / dims.x % dims.y, tid / (dims.x * dims.y)};
    blockDim = dim3(dims.x, dims.y, dims.z);
    gridDim = dim3(grid.x, grid.y, grid.z);
    for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = {x, y, z};
                my_count = 0;
                body(ctx);
                arrive({my_count, "", kEnd});
            }
        }
    }
    current = nullptr;
}

// What a launch hands its workers: written by the launching thread before it wakes them (the
// semaphore's release/acquire publishes it), unchanged until all have reported back.
struct Job {
    Block* block;
    Dim grid;
    Dim dims;
    void (*body)(void*);
    void* ctx;
};

struct Worker {
    std::binary_semaphore go{0};
};

// The pool. Allocated once and never freed, and its threads are detached: at process exit
// they are asleep on their semaphores (a launch is synchronous, so none is mid-launch unless
// another thread exits during one, as before), no destructor runs under them, and exit ends
// them. Only the launching thread, under `launch_lock`, touches `workers` and `job`.
struct Pool {
    std::vector<Worker*> workers;
    Job job{};
    std::atomic<unsigned> running{0};
    std::binary_semaphore done{0};
};

Pool& pool() {
    static Pool* p = new Pool;
    return *p;
}

[[noreturn]] void worker_main(Worker* self, unsigned tid) {
    Pool& p = pool();
    for (;;) {
        self->go.acquire();
        Job job = p.job;
        run_thread(job.block, tid, job.grid, job.dims, job.body, job.ctx);
        // acq_rel: the last worker's decrement follows every other's (and their kernel
        // writes), and its release of `done` hands all of it to the launching thread.
        if (p.running.fetch_sub(1, std::memory_order_acq_rel) == 1) p.done.release();
    }
}

}  // namespace

void sync_threads(const char* file, int line) {
    if (current == nullptr) {
        fprintf(stderr, "shim: __syncthreads() outside a launch\n");
        abort();
    }
    arrive({my_count++, file, line});
}

void launch_impl(const char* name, Dim grid, Dim block, void (*body)(void*), void* ctx) {
    validate(name, grid, block);
    std::lock_guard<std::mutex> guard(launch_lock);
    unsigned n = block.x * block.y * block.z;
    Block state(name, n);
    Pool& p = pool();
    // Grow to the largest block seen (validate caps it at 1024).
    while (p.workers.size() < n) {
        Worker* w = new Worker;
        std::thread(worker_main, w, static_cast<unsigned>(p.workers.size())).detach();
        p.workers.push_back(w);
    }
    p.job = Job{&state, grid, block, body, ctx};
    p.running.store(n, std::memory_order_relaxed);
    for (unsigned tid = 0; tid < n; ++tid) p.workers[tid]->go.release();
    p.done.acquire();
}

}  // namespace shim
