// The emulator runtime: runs a kernel over a grid of threadgroups. Each
// threadgroup runs on one OS thread (a pool of workers takes threadgroups in
// turn); its GPU threads are fibers that switch at every threadgroup_barrier,
// simdgroup_barrier and simd_* call. Between two threadgroup barriers each
// simdgroup runs as far as it can before the next one starts (the first or
// the last first, by the dispatch's order), its lanes one after another. The
// scheduler checks at each switch point what a GPU would need to hold (every
// thread at the same barrier, every live lane of a simdgroup at the same
// collective) and reports a violation with the .metal file and line instead
// of hanging or crashing. Threadgroup memory starts as all ones bits (NaN in
// every float format) in every threadgroup.
//
// Go calls the emu_* functions at the end through purego.
#include "msl_rt.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__) || defined(MSL_UCONTEXT)
#define MSL_USE_UCONTEXT 1
#include <ucontext.h>
#endif

#define EMU_ABI 1
#define EMU_MAX_BUFFERS 31
#define EMU_MAX_CONSTANTS 64
#define EMU_MAX_THREADS 1024
#define EMU_MAX_WORKERS 64
#define EMU_TGMEM_MAX 32768 // Apple GPUs' maxThreadgroupMemoryLength
#define EMU_MAX_LOCALS 64
#define EMU_ERR 4096

__thread msl_thread *msl_current;

// ---- registries (filled by static constructors of the translated kernels) ----

struct KernelEntry {
  const char *name;
  void (*fn)(void);
  const char *file;
  int line, max_threads;
};
struct ConstEntry {
  int index;
  const char *name;
  void *ptr;
  size_t size;
  bool *defined;
  const char *type, *file;
  int line;
};

static KernelEntry *kernels;
static int nkernels, capkernels;
static ConstEntry *consts;
static int nconsts, capconsts;
static void (**derived)(void);
static int nderived, capderived;

template <class T> static void push(T *&a, int &n, int &cap, const T &v) {
  if (n == cap) {
    cap = cap ? cap * 2 : 16;
    a = (T *)realloc((void *)a, sizeof(T) * cap);
    if (!a) abort();
  }
  a[n++] = v;
}

extern "C" void msl_register_kernel(const char *name, void (*fn)(void), const char *file, int line, int max_threads) {
  push(kernels, nkernels, capkernels, KernelEntry{name, fn, file, line, max_threads});
}
extern "C" void msl_register_constant(int index, const char *name, void *ptr, size_t size, bool *defined, const char *type,
                                      const char *file, int line) {
  push(consts, nconsts, capconsts, ConstEntry{index, name, ptr, size, defined, type, file, line});
}
extern "C" void msl_register_derived(void (*fn)(void)) { push(derived, nderived, capderived, fn); }

// ---- fibers --------------------------------------------------------------------

struct Fiber;
extern "C" void msl_fiber_main(Fiber *f);

#ifndef MSL_USE_UCONTEXT
// msl_ctx_swap saves the callee-saved registers, MXCSR and the x87 control
// word on the current stack, stores the stack pointer in *save and resumes
// the context whose stack pointer is `to`. msl_ctx_start is where a new
// fiber's first swap returns to: it calls r12(r13).
extern "C" void msl_ctx_swap(void **save, void *to);
extern "C" void msl_ctx_start(void);
__asm__(R"(
  .pushsection .text
  .globl msl_ctx_swap
  .hidden msl_ctx_swap
  .type msl_ctx_swap, @function
msl_ctx_swap:
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
  .size msl_ctx_swap, .-msl_ctx_swap

  .globl msl_ctx_start
  .hidden msl_ctx_start
  .type msl_ctx_start, @function
msl_ctx_start:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size msl_ctx_start, .-msl_ctx_start
  .popsection
)");
#endif

enum { F_RUN, F_BARRIER, F_SIMD, F_DONE, F_FAILED };

struct Fiber {
  void *sp;
  char *stack; // lowest usable byte; a guard page lies below
  int state, kind;
  msl_loc loc;
  msl_thread th;
#ifdef MSL_USE_UCONTEXT
  ucontext_t uc;
#endif
};

struct Simdgroup {
  uint32_t epoch;
  uint32_t mask[2];
  // Two generations: a lane that runs ahead to the next collective must not
  // overwrite values that slower lanes still read.
  unsigned char slots[2][32][MSL_SLOT_BYTES];
};

struct Local {
  int id;
  size_t off, size;
};

struct Job;

struct Worker {
  int index;
  Fiber *fibers;
  int cap;
  void *sched_sp;
#ifdef MSL_USE_UCONTEXT
  ucontext_t sched_uc;
#endif
  Fiber *cur;
  Job *job;
  Simdgroup sg[EMU_MAX_THREADS / 32];
  unsigned char *tgmem;
  size_t tg_used;
  Local locals[EMU_MAX_LOCALS];
  int nlocals;
  uint32_t group[3];
};

static __thread Worker *tls_worker;
static const size_t stack_size = 256 << 10; // per fiber (and a guard page)
static size_t page_size;

// ---- the dispatch description (mirrors dispatchDesc in Go: all uint64) ----------

struct emu_desc {
  uint64_t kernel, order, workers, reserved;
  uint64_t groups[3], threads[3];
  uint64_t buf_bound; // bit i: buffer(i) is bound
  uint64_t buf_ptr[EMU_MAX_BUFFERS];
  uint64_t buf_len[EMU_MAX_BUFFERS];
  uint64_t tg_len[EMU_MAX_BUFFERS];
  uint64_t nconst;
  uint64_t const_index[EMU_MAX_CONSTANTS];
  uint64_t const_bits[EMU_MAX_CONSTANTS][2];
};

struct Job {
  const emu_desc *d;
  const KernelEntry *k;
  uint32_t groups[3], threads[3];
  uint64_t total, next;
  int nthreads, nsg, order;
  size_t tg_args;                 // bytes of [[threadgroup(i)]] arguments
  size_t tg_off[EMU_MAX_BUFFERS];    // where threadgroup(i) starts in them
  int failed;
  pthread_mutex_t mu;
  char err[EMU_ERR];
};

static void job_error(Job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_error(Job *j, const char *fmt, ...) {
  pthread_mutex_lock(&j->mu);
  if (!j->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    va_end(ap);
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&j->mu);
}

static void *map_pages(size_t n) {
  void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Grows the worker's fibers to n, each with its own stack and a guard page
// below it (a deep kernel stack faults instead of corrupting a neighbour).
static bool ensure_fibers(Worker *w, int n) {
  if (n <= w->cap) return true;
  Fiber *nf = (Fiber *)realloc(w->fibers, sizeof(Fiber) * n);
  if (!nf) return false;
  w->fibers = nf;
  size_t per = stack_size + page_size;
  char *region = (char *)map_pages(per * (n - w->cap));
  if (!region) return false;
  for (int i = w->cap; i < n; i++) {
    char *base = region + per * (i - w->cap);
    mprotect(base, page_size, PROT_NONE);
    nf[i].stack = base + page_size;
  }
  w->cap = n;
  return true;
}

static void yield_to_scheduler(Fiber *f) {
  Worker *w = tls_worker;
#ifdef MSL_USE_UCONTEXT
  swapcontext(&f->uc, &w->sched_uc);
#else
  msl_ctx_swap(&f->sp, w->sched_sp);
#endif
}

static void resume(Worker *w, Fiber *f) {
  w->cur = f;
  msl_current = &f->th;
#ifdef MSL_USE_UCONTEXT
  swapcontext(&w->sched_uc, &f->uc);
#else
  msl_ctx_swap(&w->sched_sp, f->sp);
#endif
  w->cur = nullptr;
}

extern "C" void msl_fiber_main(Fiber *f) {
  tls_worker->job->k->fn();
  f->state = F_DONE;
  yield_to_scheduler(f);
  __builtin_unreachable();
}

#ifdef MSL_USE_UCONTEXT
static void fiber_entry_uc(void) { msl_fiber_main(tls_worker->cur); }
#endif

static void start_fiber(Fiber *f) {
  f->state = F_RUN;
#ifdef MSL_USE_UCONTEXT
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = stack_size;
  f->uc.uc_link = nullptr;
  makecontext(&f->uc, fiber_entry_uc, 0);
#else
  uintptr_t top = ((uintptr_t)(f->stack + stack_size)) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)(top - 16); // 16-aligned after msl_ctx_swap's ret
  *--sp = (uint64_t)(uintptr_t)msl_ctx_start;
  *--sp = 0;                             // rbp
  *--sp = 0;                             // rbx
  *--sp = (uint64_t)(uintptr_t)msl_fiber_main; // r12
  *--sp = (uint64_t)(uintptr_t)f;        // r13
  *--sp = 0;                             // r14
  *--sp = 0;                             // r15
  uint32_t mxcsr = __builtin_ia32_stmxcsr();
  uint16_t fcw;
  __asm__ volatile("fnstcw %0" : "=m"(fcw));
  *--sp = (uint64_t)mxcsr | (uint64_t)fcw << 32;
  f->sp = sp;
#endif
}

// ---- switch points (called from kernels through the shim) ---------------------

static const char *kind_names[MSL_KIND_COUNT] = {
    "threadgroup_barrier",
    "simdgroup_barrier",
    "simd_sum",
    "simd_product",
    "simd_min",
    "simd_max",
    "simd_and",
    "simd_or",
    "simd_xor",
    "simd_shuffle",
    "simd_shuffle_down",
    "simd_shuffle_up",
    "simd_shuffle_xor",
    "simd_shuffle_rotate_down",
    "simd_shuffle_rotate_up",
    "simd_broadcast",
    "simd_broadcast_first",
    "simd_prefix_inclusive_sum",
    "simd_prefix_exclusive_sum",
    "simd_prefix_inclusive_product",
    "simd_prefix_exclusive_product",
    "simd_all",
    "simd_any",
    "simd_ballot",
    "simd_is_first",
    "simd_active_threads_mask",
    "simdgroup_load",
    "simdgroup_store",
    "simdgroup_multiply",
};

extern "C" void msl_barrier(msl_loc loc) {
  Fiber *f = tls_worker->cur;
  f->state = F_BARRIER;
  f->kind = MSL_THREADGROUP_BARRIER;
  f->loc = loc;
  yield_to_scheduler(f);
}

extern "C" const unsigned char *msl_collective(int kind, const void *val, size_t size, msl_loc loc, uint32_t *mask) {
  Worker *w = tls_worker;
  Fiber *f = w->cur;
  Simdgroup *sg = &w->sg[f->th.simdgroup_index_in_threadgroup];
  uint32_t e = sg->epoch & 1;
  if (size) memcpy(sg->slots[e][f->th.thread_index_in_simdgroup], val, size);
  f->state = F_SIMD;
  f->kind = kind;
  f->loc = loc;
  yield_to_scheduler(f);
  *mask = sg->mask[e];
  return &sg->slots[e][0][0];
}

static void fail_here(const char *msg) {
  Worker *w = tls_worker;
  Fiber *f = w ? w->cur : nullptr;
  if (!f) return; // not inside a kernel: nothing to unwind to
  const uint32_t *g = w->group;
  job_error(w->job, "%s, threadgroup (%u,%u,%u), thread %u: %s", w->job->k->name, g[0], g[1], g[2],
            f->th.thread_index_in_threadgroup, msg);
  f->state = F_FAILED;
  yield_to_scheduler(f);
  __builtin_unreachable();
}

extern "C" void msl_fail(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - n, fmt, ap);
  va_end(ap);
  fail_here(msg);
  abort();
}

extern "C" void *msl_buffer(int index, const char *file, int line) {
  const emu_desc *d = tls_worker->job->d;
  if (index < 0 || index >= EMU_MAX_BUFFERS) msl_fail(file, line, "buffer(%d) is outside 0..%d", index, EMU_MAX_BUFFERS - 1);
  if (!(d->buf_bound >> index & 1)) msl_fail(file, line, "buffer(%d) is not bound", index);
  return (void *)(uintptr_t)d->buf_ptr[index];
}

extern "C" void *msl_threadgroup_arg(int index, const char *file, int line) {
  Worker *w = tls_worker;
  const emu_desc *d = w->job->d;
  if (index < 0 || index >= EMU_MAX_BUFFERS) msl_fail(file, line, "threadgroup(%d) is outside 0..%d", index, EMU_MAX_BUFFERS - 1);
  if (!d->tg_len[index]) msl_fail(file, line, "threadgroup(%d) has no memory length set", index);
  return w->tgmem + w->job->tg_off[index];
}

extern "C" void *msl_threadgroup_local(int id, size_t size, size_t align, const char *file, int line) {
  Worker *w = tls_worker;
  for (int i = 0; i < w->nlocals; i++)
    if (w->locals[i].id == id) return w->tgmem + w->locals[i].off;
  if (w->nlocals == EMU_MAX_LOCALS) msl_fail(file, line, "more than %d threadgroup variables", EMU_MAX_LOCALS);
  if (align < 16) align = 16;
  size_t off = (w->tg_used + align - 1) & ~(align - 1);
  if (off + size > EMU_TGMEM_MAX)
    msl_fail(file, line, "threadgroup memory of %zu bytes exceeds the %d bytes of an Apple GPU", off + size, EMU_TGMEM_MAX);
  memset(w->tgmem + off, 0xff, size);
  w->locals[w->nlocals++] = Local{id, off, size};
  w->tg_used = off + size;
  return w->tgmem + off;
}

// ---- the scheduler ------------------------------------------------------------------

// describe lists what threads [lo, hi) of the threadgroup are doing, one
// entry per distinct state and place: "threads 0-15 wait at simd_sum
// (a.metal:20); threads 16-31 returned".
static void describe(Worker *w, int lo, int hi, const char *unit, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  bool used[EMU_MAX_THREADS] = {};
  for (int t = lo; t < hi; t++) {
    if (used[t]) continue;
    Fiber *a = &w->fibers[t];
    char ranges[512];
    size_t rn = 0;
    ranges[0] = 0;
    int run = -1;
    for (int u = t; u <= hi; u++) {
      bool same = false;
      if (u < hi && !used[u]) {
        Fiber *b = &w->fibers[u];
        same = b->state == a->state &&
               (a->state == F_DONE || (b->kind == a->kind && b->loc.line == a->loc.line && b->loc.col == a->loc.col &&
                                       strcmp(b->loc.file, a->loc.file) == 0));
      }
      if (same) {
        used[u] = true;
        if (run < 0) run = u;
      } else if (run >= 0) {
        int l0 = run - lo, l1 = u - 1 - lo;
        if (rn < sizeof ranges - 32)
          rn += l0 == l1 ? snprintf(ranges + rn, sizeof ranges - rn, "%s%d", rn ? "," : "", l0)
                         : snprintf(ranges + rn, sizeof ranges - rn, "%s%d-%d", rn ? "," : "", l0, l1);
        run = -1;
      }
    }
    if (n >= cap - 64) break;
    if (a->state == F_DONE)
      n += snprintf(out + n, cap - n, "%s%s %s returned", n ? "; " : "", unit, ranges);
    else
      n += snprintf(out + n, cap - n, "%s%s %s wait at %s (%s:%d)", n ? "; " : "", unit, ranges, kind_names[a->kind],
                    a->loc.file, a->loc.line);
  }
}

static bool same_place(const Fiber *a, const Fiber *b) {
  return a->kind == b->kind && a->loc.line == b->loc.line && a->loc.col == b->loc.col &&
         (a->loc.file == b->loc.file || strcmp(a->loc.file, b->loc.file) == 0);
}

static void run_group(Worker *w, Job *j, uint64_t g) {
  w->group[0] = (uint32_t)(g % j->groups[0]);
  w->group[1] = (uint32_t)(g / j->groups[0] % j->groups[1]);
  w->group[2] = (uint32_t)(g / ((uint64_t)j->groups[0] * j->groups[1]));
  memset(w->tgmem, 0xff, j->tg_args);
  w->tg_used = j->tg_args;
  w->nlocals = 0;
  int n = j->nthreads;
  for (int t = 0; t < n; t++) {
    Fiber *f = &w->fibers[t];
    msl_thread *th = &f->th;
    uint32_t tp[3] = {t % j->threads[0], t / j->threads[0] % j->threads[1], t / (j->threads[0] * j->threads[1])};
    for (int a = 0; a < 3; a++) {
      th->thread_position_in_threadgroup[a] = tp[a];
      th->threadgroup_position_in_grid[a] = w->group[a];
      th->threads_per_threadgroup[a] = j->threads[a];
      th->threadgroups_per_grid[a] = j->groups[a];
      th->threads_per_grid[a] = j->threads[a] * j->groups[a];
      th->thread_position_in_grid[a] = w->group[a] * j->threads[a] + tp[a];
    }
    th->thread_index_in_threadgroup = t;
    th->thread_index_in_simdgroup = t % 32;
    th->simdgroup_index_in_threadgroup = t / 32;
    th->simdgroups_per_threadgroup = j->nsg;
    th->threads_per_simdgroup = 32;
    start_fiber(f);
  }
  for (int s = 0; s < j->nsg; s++) w->sg[s].epoch = 0;

  char what[2048];
  for (;;) {
    // Each simdgroup runs as far as it can (its collectives complete as soon
    // as its own lanes arrive) before the next one starts, the first or the
    // last one first: on a GPU simdgroups do not wait for each other between
    // barriers, and a missing barrier shows in one of the two orders.
    for (int k = 0; k < j->nsg; k++) {
      int s = j->order ? j->nsg - 1 - k : k;
      int lo = s * 32, hi = lo + 32 < n ? lo + 32 : n;
      for (;;) {
        for (int l = 0; l < hi - lo; l++) {
          Fiber *f = &w->fibers[j->order ? hi - 1 - l : lo + l];
          if (f->state != F_RUN) continue;
          resume(w, f);
          if (f->state == F_FAILED) return;
        }
        // Every lane is blocked or done. Those at a simd collective go on
        // if every live lane is at the same one.
        uint32_t waiting = 0, alive = 0;
        Fiber *first = nullptr;
        bool mismatch = false;
        for (int t = lo; t < hi; t++) {
          Fiber *f = &w->fibers[t];
          if (f->state == F_DONE) continue;
          alive |= 1u << (t - lo);
          if (f->state != F_SIMD) continue;
          waiting |= 1u << (t - lo);
          if (!first)
            first = f;
          else if (!same_place(first, f))
            mismatch = true;
        }
        if (!waiting) break;
        if (mismatch || waiting != alive) {
          describe(w, lo, hi, "lanes", what, sizeof what);
          job_error(j, "%s, threadgroup (%u,%u,%u), simdgroup %d: divergent simd collective: %s", j->k->name, w->group[0],
                    w->group[1], w->group[2], s, what);
          return;
        }
        Simdgroup *sg = &w->sg[s];
        sg->mask[sg->epoch & 1] = waiting;
        sg->epoch++;
        for (int t = lo; t < hi; t++)
          if (w->fibers[t].state == F_SIMD) w->fibers[t].state = F_RUN;
      }
    }
    int live = 0;
    for (int t = 0; t < n; t++) live += w->fibers[t].state != F_DONE;
    if (!live) return;

    // Every live thread waits at a threadgroup barrier: all at the same one,
    // and none returned, or the threadgroup would hang on a GPU.
    Fiber *first = nullptr;
    bool ok = live == n;
    for (int t = 0; t < n && ok; t++) {
      Fiber *f = &w->fibers[t];
      if (!first)
        first = f;
      else if (!same_place(first, f))
        ok = false;
    }
    if (!ok) {
      describe(w, 0, n, "threads", what, sizeof what);
      job_error(j, "%s, threadgroup (%u,%u,%u): deadlock: not every thread reaches the same threadgroup_barrier: %s", j->k->name,
                w->group[0], w->group[1], w->group[2], what);
      return;
    }
    for (int t = 0; t < n; t++) w->fibers[t].state = F_RUN;
  }
}

// ---- the worker pool ---------------------------------------------------------------------

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t dispatch_mu = PTHREAD_MUTEX_INITIALIZER;
static Worker *workers[EMU_MAX_WORKERS];
static int nworkers;
static uint64_t generation;
static Job *cur_job;
static int job_workers, pending;

static void run_job(Worker *w, Job *j) {
  tls_worker = w;
  w->job = j;
  if (!ensure_fibers(w, j->nthreads)) {
    job_error(j, "%s: cannot allocate %d fiber stacks", j->k->name, j->nthreads);
    return;
  }
  for (;;) {
    if (__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE)) return;
    uint64_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (i >= j->total) return;
    run_group(w, j, j->order ? j->total - 1 - i : i);
  }
}

static void *worker_main(void *arg) {
  Worker *w = (Worker *)arg;
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&pool_mu);
    while (generation == seen) pthread_cond_wait(&pool_cv, &pool_mu);
    seen = generation;
    Job *j = cur_job;
    bool use = w->index < job_workers;
    pthread_mutex_unlock(&pool_mu);
    if (use) run_job(w, j);
    pthread_mutex_lock(&pool_mu);
    if (--pending == 0) pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&pool_mu);
  }
  return nullptr;
}

// Workers block every signal: the host process (the Go runtime) handles them
// on its own threads.
static bool grow_pool(int n) {
  while (nworkers < n) {
    Worker *w = (Worker *)calloc(1, sizeof(Worker));
    if (!w) return false;
    w->index = nworkers;
    w->tgmem = (unsigned char *)map_pages(EMU_TGMEM_MAX);
    if (!w->tgmem) return false;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t tid;
    int rc = pthread_create(&tid, nullptr, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) return false;
    pthread_detach(tid);
    pthread_mutex_lock(&pool_mu);
    workers[nworkers++] = w;
    pthread_mutex_unlock(&pool_mu);
  }
  return true;
}

// ---- the C API ---------------------------------------------------------------------------
// The only symbols the library exports (it is built with -fvisibility=hidden).

#define EMU_API __attribute__((visibility("default")))

extern "C" {

EMU_API int emu_abi(void) { return EMU_ABI; }
EMU_API uint64_t emu_desc_size(void) { return sizeof(emu_desc); }
EMU_API int emu_kernel_count(void) { return nkernels; }
EMU_API const char *emu_kernel_name(int i) { return i >= 0 && i < nkernels ? kernels[i].name : ""; }
EMU_API const char *emu_kernel_file(int i) { return i >= 0 && i < nkernels ? kernels[i].file : ""; }
EMU_API int emu_kernel_line(int i) { return i >= 0 && i < nkernels ? kernels[i].line : 0; }
EMU_API int emu_kernel_max_threads(int i) { return i >= 0 && i < nkernels ? kernels[i].max_threads : 0; }
EMU_API int emu_constant_count(void) { return nconsts; }
EMU_API const char *emu_constant_name(int i) { return i >= 0 && i < nconsts ? consts[i].name : ""; }
EMU_API int emu_constant_index(int i) { return i >= 0 && i < nconsts ? consts[i].index : -1; }
EMU_API int emu_constant_size(int i) { return i >= 0 && i < nconsts ? (int)consts[i].size : 0; }
EMU_API const char *emu_constant_type(int i) { return i >= 0 && i < nconsts ? consts[i].type : ""; }

// Runs one dispatch to completion. Returns 0, or 1 with the message in err.
EMU_API int emu_dispatch(const emu_desc *d, char *err, uint64_t errlen) {
  if (!page_size) page_size = (size_t)sysconf(_SC_PAGESIZE);
  pthread_mutex_lock(&dispatch_mu);
  Job j;
  memset(&j, 0, sizeof j);
  pthread_mutex_init(&j.mu, nullptr);
  j.d = d;
  if (d->kernel >= (uint64_t)nkernels) {
    job_error(&j, "no kernel with index %llu", (unsigned long long)d->kernel);
    goto out;
  }
  j.k = &kernels[d->kernel];
  j.order = d->order != 0;
  j.total = 1;
  {
    uint64_t nt = 1;
    for (int a = 0; a < 3; a++) {
      if (d->groups[a] == 0 || d->threads[a] == 0 || d->groups[a] > 0xffffffffu || d->threads[a] > EMU_MAX_THREADS) {
        job_error(&j, "%s: bad grid %llux%llux%llu threadgroups of %llux%llux%llu threads", j.k->name,
                  (unsigned long long)d->groups[0], (unsigned long long)d->groups[1], (unsigned long long)d->groups[2],
                  (unsigned long long)d->threads[0], (unsigned long long)d->threads[1], (unsigned long long)d->threads[2]);
        goto out;
      }
      j.groups[a] = (uint32_t)d->groups[a];
      j.threads[a] = (uint32_t)d->threads[a];
      j.total *= d->groups[a];
      nt *= d->threads[a];
    }
    int limit = j.k->max_threads > 0 ? j.k->max_threads : EMU_MAX_THREADS;
    if (nt > (uint64_t)limit) {
      job_error(&j, "%s: %llu threads per threadgroup, more than its %d", j.k->name, (unsigned long long)nt, limit);
      goto out;
    }
    j.nthreads = (int)nt;
    j.nsg = (j.nthreads + 31) / 32;
  }
  for (int i = 0; i < EMU_MAX_BUFFERS; i++) {
    if (d->tg_len[i] % 16) {
      job_error(&j, "%s: threadgroup(%d) length %llu is not a multiple of 16", j.k->name, i, (unsigned long long)d->tg_len[i]);
      goto out;
    }
    j.tg_off[i] = j.tg_args;
    j.tg_args += d->tg_len[i];
  }
  if (j.tg_args > EMU_TGMEM_MAX) {
    job_error(&j, "%s: %zu bytes of threadgroup arguments exceed the %d bytes of an Apple GPU", j.k->name, j.tg_args, EMU_TGMEM_MAX);
    goto out;
  }

  // Function constants: all undefined and zero, then the given ones; then
  // the program-scope constants computed from them.
  for (int i = 0; i < nconsts; i++) {
    memset(consts[i].ptr, 0, consts[i].size);
    *consts[i].defined = false;
  }
  if (d->nconst > EMU_MAX_CONSTANTS) {
    job_error(&j, "%s: %llu function constants, at most %d", j.k->name, (unsigned long long)d->nconst, EMU_MAX_CONSTANTS);
    goto out;
  }
  for (uint64_t c = 0; c < d->nconst; c++) {
    int found = 0;
    for (int i = 0; i < nconsts; i++) {
      if ((uint64_t)consts[i].index != d->const_index[c]) continue;
      if (consts[i].size > sizeof d->const_bits[c]) {
        job_error(&j, "function constant %s: %zu bytes are too many", consts[i].name, consts[i].size);
        goto out;
      }
      memcpy(consts[i].ptr, d->const_bits[c], consts[i].size);
      *consts[i].defined = true;
      found = 1;
    }
    if (!found) {
      job_error(&j, "%s: no function constant with index %llu", j.k->name, (unsigned long long)d->const_index[c]);
      goto out;
    }
  }
  for (int i = 0; i < nderived; i++) derived[i]();

  {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nw = d->workers ? (int)d->workers : (int)(ncpu > 0 ? ncpu : 1);
    if (nw > EMU_MAX_WORKERS) nw = EMU_MAX_WORKERS;
    if ((uint64_t)nw > j.total) nw = (int)j.total;
    if (!grow_pool(nw)) {
      job_error(&j, "%s: cannot start %d worker threads", j.k->name, nw);
      goto out;
    }
    pthread_mutex_lock(&pool_mu);
    cur_job = &j;
    job_workers = nw;
    pending = nworkers;
    generation++;
    pthread_cond_broadcast(&pool_cv);
    while (pending) pthread_cond_wait(&done_cv, &pool_mu);
    cur_job = nullptr;
    pthread_mutex_unlock(&pool_mu);
  }

out:
  int failed = j.failed;
  if (failed && err && errlen) snprintf(err, errlen, "%s", j.err);
  pthread_mutex_destroy(&j.mu);
  pthread_mutex_unlock(&dispatch_mu);
  return failed;
}

} // extern "C"
