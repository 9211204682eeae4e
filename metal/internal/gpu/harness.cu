// The GPU harness: replays traces written by metal/internal/gpu (export_test.go)
// through the CUDA translation of the .metal kernels (kernels.cu, made by
// metal/msl.TranslateCUDA).
//
//   harness check DIR/check.trace   run each recorded dispatch from the
//                                   emulator's bytes and compare what it
//                                   wrote with the emulator's (only the
//                                   kernels whose names contain
//                                   $CHECK_KERNELS, when set)
//   harness time  DIR/x.trace [iters] [--flush] [--per-grid] [--wall]
//                                   run the trace's dispatches in order,
//                                   time each one (CUDA events, L2 flushed
//                                   before every repetition with --flush)
//
// Build: nvcc -std=c++17 -O3 -arch=sm_90 -I include -I DIR harness.cu
// (run.sh does it, with -DMSL_FC_<i>=v for specialised builds).
#include "kernels.cu" // from export_test.go, on the include path (-I DIR)

// The trace format (trace.go's traceFormat). 2: every inline argument
// block is checked against the size of the struct its kernel reads.
#define TRACE_FORMAT 2

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
      exit(2);                                                                                    \
    }                                                                                             \
  } while (0)

struct Bind { int index, buf; long off; };
struct Const { int index; std::vector<unsigned char> v; };
struct Inline { int index; std::vector<unsigned char> v; void *dev = nullptr; };
struct After { int buf; std::string blob, kind; };
struct Dispatch {
  std::string kernel;
  unsigned g[3], t[3];
  std::vector<Const> consts;
  std::vector<Bind> binds;
  std::vector<Inline> inl;
  std::vector<std::pair<int, int>> tg;
  std::vector<std::pair<int, std::string>> before;
  std::vector<After> after;
  const msl_kernel_entry *k = nullptr;
};
struct Buffer { long size; std::string init; void *dev = nullptr; };

static std::string g_dir;
static std::map<std::string, std::string> g_info;
static std::vector<Buffer> g_bufs;
static std::vector<Dispatch> g_list;

static std::vector<unsigned char> hexbytes(const std::string &h) {
  std::vector<unsigned char> v(h.size() / 2);
  for (size_t i = 0; i < v.size(); i++) v[i] = (unsigned char)strtoul(h.substr(2 * i, 2).c_str(), nullptr, 16);
  return v;
}

static std::map<std::string, std::shared_ptr<std::vector<unsigned char>>> g_blobs;
static std::shared_ptr<std::vector<unsigned char>> blob(const std::string &name) {
  auto it = g_blobs.find(name);
  if (it != g_blobs.end()) return it->second;
  std::string path = g_dir + "/blobs/" + name;
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path.c_str()); exit(2); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  auto v = std::make_shared<std::vector<unsigned char>>(n);
  if (n && fread(v->data(), 1, n, f) != (size_t)n) { fprintf(stderr, "short read %s\n", path.c_str()); exit(2); }
  fclose(f);
  if (g_blobs.size() > 64) g_blobs.clear();
  g_blobs[name] = v;
  return v;
}

static const msl_kernel_entry *find_kernel(const std::string &name) {
  for (const msl_kernel_entry *k = msl_kernels; k->name; k++)
    if (name == k->name) return k;
  return nullptr;
}

// check_args refuses a trace whose inline argument block differs in size
// from the struct the kernel reads there (a trace recorded against another
// version of the kernel's arguments would replay garbage: a 52-byte block
// where the kernel reads 72 ran a 27 ms attention on nonsense).
static void check_args(const char *path, size_t i, const Dispatch &d) {
  for (const Inline &x : d.inl)
    for (const int *a = d.k->arg_bytes; a && a[0] >= 0; a += 2)
      if (a[0] == x.index && a[1] > 0 && a[1] != (int)x.v.size()) {
        fprintf(stderr, "%s: refused: dispatch %zu %s: buffer(%d) holds %zu bytes, the kernel's argument struct is %d (%s): re-export the trace\n",
                path, i, d.kernel.c_str(), x.index, x.v.size(), a[1], d.k->where);
        exit(3);
      }
}

static void load(const char *path) {
  g_dir = path;
  g_dir = g_dir.substr(0, g_dir.rfind('/'));
  FILE *f = fopen(path, "r");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  char line[1 << 16];
  line[0] = 0;
  Dispatch cur;
  // The format this harness reads (trace.go's traceFormat): a trace of
  // another (an older export left in DIR) is refused, not replayed.
  if (!fgets(line, sizeof line, f) || strncmp(line, "nibble-trace ", 13) != 0 || atoi(line + 13) != TRACE_FORMAT) {
    fprintf(stderr, "%s: refused: trace format \"%.*s\", this harness reads nibble-trace %d (re-export: go test ./metal/internal/gpu -run TestExport -args -out DIR)\n",
            path, (int)strcspn(line, "\n"), line, TRACE_FORMAT);
    exit(3);
  }
  while (fgets(line, sizeof line, f)) {
    std::istringstream in(line);
    std::string w;
    in >> w;
    if (w == "info") {
      std::string k, v;
      in >> k >> v;
      g_info[k] = v;
    } else if (w == "buffer") {
      int id; long size; std::string init;
      in >> id >> size >> init;
      if ((int)g_bufs.size() <= id) g_bufs.resize(id + 1);
      g_bufs[id].size = size;
      g_bufs[id].init = init;
    } else if (w == "dispatch") {
      cur = Dispatch();
      in >> cur.kernel >> cur.g[0] >> cur.g[1] >> cur.g[2] >> cur.t[0] >> cur.t[1] >> cur.t[2];
    } else if (w == "const") {
      Const c; std::string h;
      in >> c.index >> h;
      c.v = hexbytes(h);
      cur.consts.push_back(c);
    } else if (w == "bind") {
      Bind b;
      in >> b.index >> b.buf >> b.off;
      cur.binds.push_back(b);
    } else if (w == "inline") {
      Inline x; std::string h;
      in >> x.index >> h;
      x.v = hexbytes(h);
      cur.inl.push_back(x);
    } else if (w == "tg") {
      int i, n;
      in >> i >> n;
      cur.tg.push_back({i, n});
    } else if (w == "before") {
      int b; std::string name;
      in >> b >> name;
      cur.before.push_back({b, name});
    } else if (w == "after") {
      After a;
      in >> a.buf >> a.blob >> a.kind;
      cur.after.push_back(a);
    } else if (w == "end") {
      cur.k = find_kernel(cur.kernel);
      if (cur.k) check_args(path, g_list.size(), cur);
      // CHECK_KERNELS=s: only the dispatches of kernels whose names
      // contain s (each check dispatch starts from its own recorded bytes).
      const char *only = getenv("CHECK_KERNELS");
      if (!only || !*only || cur.kernel.find(only) != std::string::npos) g_list.push_back(cur);
    }
  }
  fclose(f);
}

// fill writes small random halves (finite in f16, and as f32 pairs).
__global__ void fill_halves(unsigned short *p, long n, unsigned seed) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    float u = ((h & 0xffff) / 65536.0f) * 2.0f - 1.0f;
    p[i] = __half_as_ushort(__float2half(u));
  }
}

static void alloc_buffers(bool fill) {
  for (size_t i = 0; i < g_bufs.size(); i++) {
    Buffer &b = g_bufs[i];
    if (b.size <= 0) continue;
    CK(cudaMalloc(&b.dev, (b.size + 255) & ~255L));
    CK(cudaMemset(b.dev, 0, b.size));
    if (!fill) continue;
    if (b.init != "-" && !b.init.empty()) {
      auto v = blob(b.init);
      CK(cudaMemcpy(b.dev, v->data(), std::min((long)v->size(), b.size), cudaMemcpyHostToDevice));
    } else {
      fill_halves<<<1024, 256>>>((unsigned short *)b.dev, b.size / 2, 12345u + (unsigned)i);
    }
  }
  CK(cudaDeviceSynchronize());
}

static int set_constants(const Dispatch &d) {
  for (const Const &c : d.consts) {
    const msl_constant_entry *e = msl_constants;
    while (e->name && e->index != c.index) e++;
    if (!e->name) { fprintf(stderr, "%s: no constant %d\n", d.kernel.c_str(), c.index); return -1; }
    int r = e->set(c.v.data(), (int)c.v.size(), true);
    if (r) {
      fprintf(stderr, "%s: constant %s (%d): %s\n", d.kernel.c_str(), e->name, c.index,
              r == -1 ? "this build fixed another value" : "cannot set");
      return -1;
    }
  }
  return 0;
}

static void prepare(Dispatch &d) {
  for (Inline &x : d.inl) {
    if (!x.dev) {
      CK(cudaMalloc(&x.dev, (x.v.size() + 15) & ~15UL));
      CK(cudaMemcpy(x.dev, x.v.data(), x.v.size(), cudaMemcpyHostToDevice));
    }
  }
}

static void launch(Dispatch &d, cudaStream_t s) {
  void *b[31] = {0};
  unsigned tg[31] = {0};
  for (const Bind &x : d.binds) b[x.index] = (char *)g_bufs[x.buf].dev + x.off;
  for (const Inline &x : d.inl) b[x.index] = x.dev;
  size_t shared = 0;
  for (auto &x : d.tg) {
    tg[x.first] = (unsigned)shared;
    shared += (x.second + 15) & ~15;
  }
  d.k->launch(dim3(d.g[0], d.g[1], d.g[2]), dim3(d.t[0], d.t[1], d.t[2]), shared, s, b, tg);
}

static float half_to_float(unsigned short h) {
  unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0) v = ldexpf((float)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}

struct Stat { int n = 0, fail = 0; double worst = 0; std::string where; };

// check_tolerance is the bound on |gpu - emulator| relative to the
// buffer's largest value. 1e-3 in general (fast math, other orders of
// float sums). mul_mm's products are the emulator's fma chain of exact
// half×half products; the tensor core (mma.sync) adds each 8 products and
// the accumulator in its own order, truncating the aligned significands, a
// few float ulps of the running sum per 8 columns: at most about
// cols/8 · 2 · 2^-23 of the largest partial sum, 6e-5 at 2048 columns, and
// far less in practice as the errors do not all add up: 1e-4, ten times
// tighter than the general bound.
static double check_tolerance(const std::string &kernel) {
  if (kernel.rfind("kernel_mul_mm_", 0) == 0 && kernel != "kernel_mul_mm_id_map_f32") return 1e-4;
  return 1e-3;
}

static int check(const char *path) {
  load(path);
  alloc_buffers(false);
  std::map<std::string, Stat> stats;
  int failures = 0;
  for (size_t i = 0; i < g_list.size(); i++) {
    Dispatch &d = g_list[i];
    Stat &st = stats[d.kernel];
    st.n++;
    if (!d.k) { printf("dispatch %zu %s: not in this build\n", i, d.kernel.c_str()); st.fail++; failures++; continue; }
    st.where = d.k->where;
    for (auto &bb : d.before) {
      auto v = blob(bb.second);
      CK(cudaMemcpy(g_bufs[bb.first].dev, v->data(), v->size(), cudaMemcpyHostToDevice));
    }
    if (set_constants(d)) { st.fail++; failures++; continue; }
    prepare(d);
    launch(d, 0);
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) {
      printf("dispatch %zu %s: %s\n", i, d.kernel.c_str(), cudaGetErrorString(err));
      st.fail++; failures++;
      CK(cudaDeviceReset());
      return 1;
    }
    for (const After &a : d.after) {
      auto want = blob(a.blob);
      std::vector<unsigned char> got(want->size());
      CK(cudaMemcpy(got.data(), g_bufs[a.buf].dev, got.size(), cudaMemcpyDeviceToHost));
      double err = 0;
      bool ok = true;
      long bad = 0, changed = 0;
      if (a.kind == "f32" || a.kind == "f16") {
        const bool f32 = a.kind == "f32";
        const double tol = check_tolerance(d.kernel);
        const long n = (long)got.size() / (f32 ? 4 : 2);
        double scale = 0;
        std::vector<double> g(n), w(n);
        for (long j = 0; j < n; j++) {
          if (f32) {
            float x, y;
            memcpy(&x, &got[4 * j], 4);
            memcpy(&y, &(*want)[4 * j], 4);
            g[j] = x, w[j] = y;
          } else {
            unsigned short x, y;
            memcpy(&x, &got[2 * j], 2);
            memcpy(&y, &(*want)[2 * j], 2);
            g[j] = half_to_float(x), w[j] = half_to_float(y);
          }
          if (std::isfinite(w[j])) scale = std::max(scale, std::fabs(w[j]));
        }
        for (long j = 0; j < n; j++) {
          if (std::isnan(w[j]) && std::isnan(g[j])) continue;
          if (std::isinf(w[j]) && g[j] == w[j]) continue;
          double e = std::fabs(g[j] - w[j]) / (scale > 0 ? scale : 1);
          if (!(e <= tol)) bad++;
          if (!(e <= err)) err = std::isnan(e) ? INFINITY : e;
        }
        ok = bad == 0;
      } else {
        // Bytes (KV planes, mixed codes and halves): codes may differ by
        // one where a value sits on a rounding boundary.
        auto before = std::find_if(d.before.begin(), d.before.end(), [&](auto &p) { return p.first == a.buf; });
        std::shared_ptr<std::vector<unsigned char>> b0 = before != d.before.end() ? blob(before->second) : nullptr;
        for (size_t j = 0; j < got.size(); j++) {
          if (b0 && (*b0)[j] != (*want)[j]) changed++;
          if (got[j] != (*want)[j]) bad++;
        }
        err = changed ? (double)bad / changed : (bad ? 1 : 0);
        ok = err <= 0.01;
      }
      if (!ok) {
        printf("dispatch %zu %s buffer %d (%s): max error %.3g, %ld elements off%s\n", i, d.kernel.c_str(), a.buf,
               a.kind.c_str(), err, bad, a.kind == "u8" ? " (bytes; fraction of changed bytes)" : "");
        st.fail++; failures++;
      }
      st.worst = std::max(st.worst, err);
    }
  }
  printf("%-28s %5s %5s %12s  %s\n", "kernel", "runs", "fail", "worst", "source");
  for (auto &kv : stats)
    printf("%-28s %5d %5d %12.3g  %s\n", kv.first.c_str(), kv.second.n, kv.second.fail, kv.second.worst, kv.second.where.c_str());
  printf("check: %zu dispatches of %zu kernels, %d failures\n", g_list.size(), stats.size(), failures);
  return failures ? 1 : 0;
}

// wall_time: the step's dispatches back to back as one command buffer runs
// them (no event between dispatches): launched one after another on a
// stream, and replayed as one CUDA graph captured once (the command list
// reused across tokens). Without --flush the weights stay in L2 only as far
// as they fit, as from one token to the next.
static int wall_time(int iters, bool flush, void *scratch, size_t scratch_bytes) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto measure = [&](const char *label, auto &&step) {
    for (int w = 0; w < 3; w++) step();
    CK(cudaStreamSynchronize(st));
    std::vector<double> ms_all;
    for (int it = 0; it < iters; it++) {
      if (flush) CK(cudaMemsetAsync(scratch, it & 255, scratch_bytes, st));
      CK(cudaEventRecord(e0, st));
      step();
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ms_all.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ms_all.begin(), ms_all.end());
    double sum = 0;
    for (double v : ms_all) sum += v;
    printf("wall %-8s per step: mean %.1f us, median %.1f us, best %.1f us (%d iterations%s)\n", label, 1e3 * sum / iters,
           1e3 * ms_all[iters / 2], 1e3 * ms_all[0], iters, flush ? ", L2 flushed before each" : "");
  };
  measure("stream", [&] { for (Dispatch &d : g_list) launch(d, st); });
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (Dispatch &d : g_list) launch(d, st);
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  measure("graph", [&] { CK(cudaGraphLaunch(exec, st)); });
  return 0;
}

static int timing(const char *path, int iters, bool flush, bool per_grid, bool wall) {
  load(path);
  alloc_buffers(true);
  for (Dispatch &d : g_list) {
    if (!d.k) { fprintf(stderr, "%s: not in this build\n", d.kernel.c_str()); return 1; }
    prepare(d);
  }
  void *scratch = nullptr;
  const size_t scratch_bytes = 256 << 20; // > the H100/H200 L2 (50/60 MB)
  if (flush) CK(cudaMalloc(&scratch, scratch_bytes));
  // Constants: a specialised build fixes them; a generic one takes them
  // from the first dispatch of each kernel (they may not differ).
  for (Dispatch &d : g_list)
    if (set_constants(d)) return 1;
  if (wall) return wall_time(iters, flush, scratch, scratch_bytes);
  const size_t n = g_list.size();
  std::vector<cudaEvent_t> ev(n + 1);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int w = 0; w < 2; w++)
    for (Dispatch &d : g_list) launch(d, 0);
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  std::vector<double> sum(n, 0), best(n, 1e30);
  double total = 0, total_best = 1e30;
  for (int it = 0; it < iters; it++) {
    if (flush) CK(cudaMemsetAsync(scratch, it & 255, scratch_bytes));
    CK(cudaEventRecord(ev[0]));
    for (size_t i = 0; i < n; i++) {
      launch(g_list[i], 0);
      CK(cudaEventRecord(ev[i + 1]));
    }
    CK(cudaEventSynchronize(ev[n]));
    for (size_t i = 0; i < n; i++) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
      sum[i] += ms;
      best[i] = std::min(best[i], (double)ms);
    }
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[0], ev[n]));
    total += ms;
    total_best = std::min(total_best, (double)ms);
  }
  CK(cudaGetLastError());
  // By kernel; with per_grid, by kernel and grid (a matmul's shape).
  std::map<std::string, std::pair<int, double>> by;
  for (size_t i = 0; i < n; i++) {
    std::string key = g_list[i].kernel;
    if (per_grid) key += " " + std::to_string(g_list[i].g[0]) + "x" + std::to_string(g_list[i].g[1]) + "x" + std::to_string(g_list[i].t[0]);
    auto &b = by[key];
    b.first++;
    b.second += sum[i] / iters;
  }
  const double mean = total / iters;
  printf("trace %s: %zu dispatches, %d iterations%s\n", path, n, iters, flush ? ", L2 flushed before each" : "");
  for (auto &kv : g_info) printf("info %s %s\n", kv.first.c_str(), kv.second.c_str());
  if (n <= 8)
    for (size_t i = 0; i < n; i++)
      printf("  dispatch %zu %-26s grid %ux%ux%u x %u: mean %8.1f us, best %8.1f us\n", i, g_list[i].kernel.c_str(),
             g_list[i].g[0], g_list[i].g[1], g_list[i].g[2], g_list[i].t[0], 1e3 * sum[i] / iters, 1e3 * best[i]);
  std::vector<std::pair<double, std::string>> order;
  for (auto &kv : by) order.push_back({kv.second.second, kv.first});
  std::sort(order.rbegin(), order.rend());
  printf("  %-40s %6s %10s %7s\n", per_grid ? "kernel grid" : "kernel", "count", "mean us", "share");
  for (auto &o : order)
    printf("  %-40s %6d %10.1f %6.1f%%\n", o.second.c_str(), by[o.second].first, 1e3 * o.first, 100 * o.first / mean);
  printf("total: mean %.1f us, best %.1f us\n", 1e3 * mean, 1e3 * total_best);
  auto ub = g_info.find("unique_bytes");
  if (ub != g_info.end()) {
    double bytes = atof(ub->second.c_str());
    printf("bandwidth on unique bytes: %.0f GB/s (mean), %.0f GB/s (best)\n", bytes / (mean * 1e-3) / 1e9,
           bytes / (total_best * 1e-3) / 1e9);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: harness check|time TRACE [iters] [--flush]\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "check") return check(argv[2]);
  if (mode == "time") {
    int iters = argc > 3 ? atoi(argv[3]) : 20;
    bool flush = false, per_grid = false, wall = false;
    for (int i = 4; i < argc; i++) {
      flush |= std::string(argv[i]) == "--flush";
      per_grid |= std::string(argv[i]) == "--per-grid";
      wall |= std::string(argv[i]) == "--wall";
    }
    return timing(argv[2], iters, flush, per_grid, wall);
  }
  if (mode == "list") {
    for (const msl_kernel_entry *k = msl_kernels; k->name; k++) printf("%s\n", k->name);
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
