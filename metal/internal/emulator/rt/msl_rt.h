// The interface between the MSL shim (compiled with the translated kernels)
// and the emulator runtime (runtime.cpp). Both are in the same shared
// library; Go only sees the emu_* C API at the end of runtime.cpp.
#ifndef MSL_RT_H
#define MSL_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The built-in positions of the running GPU thread (one per fiber).
typedef struct msl_thread {
  uint32_t thread_position_in_grid[3];
  uint32_t thread_position_in_threadgroup[3];
  uint32_t threadgroup_position_in_grid[3];
  uint32_t threads_per_threadgroup[3];
  uint32_t threadgroups_per_grid[3];
  uint32_t threads_per_grid[3];
  uint32_t thread_index_in_threadgroup;
  uint32_t thread_index_in_simdgroup;
  uint32_t simdgroup_index_in_threadgroup;
  uint32_t simdgroups_per_threadgroup;
  uint32_t threads_per_simdgroup;
} msl_thread;

// The GPU thread running on this OS thread (set by the scheduler before it
// switches to a fiber).
extern __thread msl_thread *msl_current;

// Kinds of switch points; the names in runtime.cpp must follow this order.
enum {
  MSL_THREADGROUP_BARRIER = 0,
  MSL_SIMDGROUP_BARRIER,
  MSL_SIMD_SUM,
  MSL_SIMD_PRODUCT,
  MSL_SIMD_MIN,
  MSL_SIMD_MAX,
  MSL_SIMD_AND,
  MSL_SIMD_OR,
  MSL_SIMD_XOR,
  MSL_SIMD_SHUFFLE,
  MSL_SIMD_SHUFFLE_DOWN,
  MSL_SIMD_SHUFFLE_UP,
  MSL_SIMD_SHUFFLE_XOR,
  MSL_SIMD_SHUFFLE_ROTATE_DOWN,
  MSL_SIMD_SHUFFLE_ROTATE_UP,
  MSL_SIMD_BROADCAST,
  MSL_SIMD_BROADCAST_FIRST,
  MSL_SIMD_PREFIX_INCLUSIVE_SUM,
  MSL_SIMD_PREFIX_EXCLUSIVE_SUM,
  MSL_SIMD_PREFIX_INCLUSIVE_PRODUCT,
  MSL_SIMD_PREFIX_EXCLUSIVE_PRODUCT,
  MSL_SIMD_ALL,
  MSL_SIMD_ANY,
  MSL_SIMD_BALLOT,
  MSL_SIMD_IS_FIRST,
  MSL_SIMD_ACTIVE_THREADS_MASK,
  MSL_SIMDGROUP_LOAD,
  MSL_SIMDGROUP_STORE,
  MSL_SIMDGROUP_MULTIPLY,
  MSL_KIND_COUNT
};

// One value per lane of a simd collective, at most this many bytes.
#define MSL_SLOT_BYTES 64

// The position in the .metal source of a switch point (through #line).
typedef struct msl_loc {
  const char *file;
  int line, col;
} msl_loc;

// threadgroup_barrier: waits until every thread of the threadgroup is here.
void msl_barrier(msl_loc loc);

// A simd collective: deposits this lane's value (size bytes), waits until
// every live lane of the simdgroup has reached the same collective, then
// returns the lanes' values (MSL_SLOT_BYTES apart) and the mask of the lanes
// that took part.
const unsigned char *msl_collective(int kind, const void *val, size_t size, msl_loc loc, uint32_t *mask);

// Kernel arguments: a bound buffer (base + offset), a [[threadgroup(i)]]
// argument, and the storage of a kernel-local threadgroup variable.
void *msl_buffer(int index, const char *file, int line);
void *msl_threadgroup_arg(int index, const char *file, int line);
void *msl_threadgroup_local(int id, size_t size, size_t align, const char *file, int line);

// Reports an error from inside a kernel and never returns.
void msl_fail(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));

// Registries, filled by static constructors that the pre-pass emits.
void msl_register_kernel(const char *name, void (*fn)(void), const char *file, int line, int max_threads);
void msl_register_constant(int index, const char *name, void *ptr, size_t size, bool *defined, const char *type, const char *file, int line);
void msl_register_derived(void (*fn)(void));

#ifdef __cplusplus
}
#endif

#endif
