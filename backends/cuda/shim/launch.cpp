// The shim's launcher: runs a kernel's grid on the CPU, block after block, each block's
// threads as concurrent OS threads meeting at a std::barrier (see shim.h for why this is
// exact). Every misuse the GPU would not report reliably (a block over 1024 threads, an empty
// grid, threads meeting at different barriers) aborts with a message naming the kernel.
#include "shim.h"

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace shim {
namespace {

// Which barrier a thread arrived at: its count of barriers so far and the source line of the
// `__syncthreads()`, or kEnd for the end of the block.
constexpr int kEnd = -1;
struct Tag {
    unsigned long long count;
    int line;
    bool operator==(const Tag&) const = default;
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
        snprintf(out, len, "barrier %llu (line %d)", t.count, t.line);
    }
}

void Check::operator()() noexcept {
    const Tag& first = block->tags[0];
    for (size_t i = 1; i < block->tags.size(); ++i) {
        if (!(block->tags[i] == first)) {
            char a[96], b[96];
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
                arrive({my_count, kEnd});
            }
        }
    }
    current = nullptr;
}

}  // namespace

void sync_threads(int line) {
    if (current == nullptr) {
        fprintf(stderr, "shim: __syncthreads() outside a launch\n");
        abort();
    }
    arrive({my_count++, line});
}

void launch_impl(const char* name, Dim grid, Dim block, void (*body)(void*), void* ctx) {
    validate(name, grid, block);
    std::lock_guard<std::mutex> guard(launch_lock);
    unsigned n = block.x * block.y * block.z;
    Block state(name, n);
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned tid = 0; tid < n; ++tid) {
        threads.emplace_back(run_thread, &state, tid, grid, block, body, ctx);
    }
    for (auto& t : threads) t.join();
}

}  // namespace shim
