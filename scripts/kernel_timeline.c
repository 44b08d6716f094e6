// A kernel timeline without Nsight Systems: loaded with LD_PRELOAD (scripts/kernel_timeline.sh),
// it asks CUPTI for every kernel's start and end on the GPU (activity records) and at exit
// summarizes the last TRACE_LAST of them (default 20000): their span, the time in kernels, the
// gaps between one kernel's end and the next one's start, and per kernel name the count, mean
// time, mean gap before it and launch shape (grid, block, registers, shared memory requested and
// as executed, local memory). Unlike ncu it runs the program at its own pace, graphs and streams
// as they are, so the gaps are real: a cold and a warm `trainer bench` differ only there.
//   TRACE_OUT=FILE (default stderr), TRACE_LAST=N, TRACE_PROGRAM=NAME (only in processes whose
//   /proc/self/comm starts with NAME: wrapper shells stay untraced), TRACE_RAW=FILE (also every one
//   of those kernels as a CSV row, by start: device, stream, start and end in ns, name; to study
//   several devices or streams, e.g. a data-parallel step's collectives beside its compute).
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t start, end, local_total;
  const char* name;
  uint32_t grid[3], block[3], regs, smem, smem_executed, local_per_thread;
  uint32_t device, stream;
} Kernel;

static Kernel* ring;  // the last `cap` kernels seen, by arrival
static size_t cap, seen;
static const uint64_t kSmallGapNs = 20000;  // gaps above this are host waits, reported apart

// Kernel names, copied once each: CUPTI gives every record of one kernel the same name pointer,
// so a copy per record (hundreds of thousands in a long run, the ring's overwritten ones lost)
// is not needed. Open addressing on the pointer; past kNames distinct pointers, a copy a record.
enum { kNames = 8192 };
static struct {
  const char* key;
  const char* copy;
} names_seen[kNames];

static const char* interned(const char* name) {
  if (!name) return "?";
  size_t h = ((uintptr_t)name >> 4) % kNames;
  for (size_t probe = 0; probe < kNames; ++probe, h = (h + 1) % kNames) {
    if (names_seen[h].key == name) return names_seen[h].copy;
    if (!names_seen[h].key) {
      names_seen[h].key = name;
      names_seen[h].copy = strdup(name);
      return names_seen[h].copy;
    }
  }
  return strdup(name);
}

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8u << 20;
  *buffer = (uint8_t*)aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                      size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity* record = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)record;
    Kernel* o = &ring[seen % cap];
    o->start = k->start;
    o->end = k->end;
    o->name = interned(k->name);
    o->grid[0] = (uint32_t)k->gridX;
    o->grid[1] = (uint32_t)k->gridY;
    o->grid[2] = (uint32_t)k->gridZ;
    o->block[0] = (uint32_t)k->blockX;
    o->block[1] = (uint32_t)k->blockY;
    o->block[2] = (uint32_t)k->blockZ;
    o->regs = k->registersPerThread;
    o->smem = (uint32_t)(k->staticSharedMemory + k->dynamicSharedMemory);
    o->smem_executed = k->sharedMemoryExecuted;
    o->local_per_thread = k->localMemoryPerThread;
    o->local_total = k->localMemoryTotal_v2;
    o->device = k->deviceId;
    o->stream = k->streamId;
    ++seen;
  }
  free(buffer);
}

static int by_start(const void* a, const void* b) {
  const Kernel *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

typedef struct {
  const char* name;
  double total_ns, gap_ns;
  size_t count;
  const Kernel* last;
} ByName;

static int by_total(const void* a, const void* b) {
  const ByName *x = a, *y = b;
  return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static void report(void) {
  cuptiActivityFlushAll(1);
  const size_t n = seen < cap ? seen : cap;
  if (n == 0) return;
  qsort(ring, n, sizeof(Kernel), by_start);
  const char* raw_path = getenv("TRACE_RAW");
  FILE* raw = raw_path ? fopen(raw_path, "w") : NULL;
  if (raw) {
    fprintf(raw, "device,stream,start_ns,end_ns,name\n");
    for (size_t i = 0; i < n; ++i)
      fprintf(raw, "%u,%u,%llu,%llu,\"%s\"\n", ring[i].device, ring[i].stream,
              (unsigned long long)ring[i].start, (unsigned long long)ring[i].end, ring[i].name);
    fclose(raw);
  }
  const char* path = getenv("TRACE_OUT");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (!f) f = stderr;
  double busy = 0, small = 0, large = 0;
  size_t n_large = 0;
  ByName* names = calloc(n, sizeof(ByName));
  size_t n_names = 0;
  for (size_t i = 0; i < n; ++i) {
    const Kernel* k = &ring[i];
    busy += (double)(k->end - k->start);
    double gap = 0;
    if (i > 0 && k->start > ring[i - 1].end) {
      const uint64_t g = k->start - ring[i - 1].end;
      if (g > kSmallGapNs) {
        large += (double)g;
        ++n_large;
      } else {
        small += (double)g;
        gap = (double)g;
      }
    }
    size_t j = 0;
    while (j < n_names && strcmp(names[j].name, k->name) != 0) ++j;
    if (j == n_names) names[n_names++].name = k->name;
    names[j].total_ns += (double)(k->end - k->start);
    names[j].gap_ns += gap;
    names[j].count++;
    names[j].last = k;
  }
  const double span = (double)(ring[n - 1].end - ring[0].start);
  fprintf(f,
          "kernels %zu (of %zu): span %.3f ms, in kernels %.3f ms, gaps under 20 us %.3f ms (%.2f us a "
          "kernel), %zu gaps over 20 us %.3f ms\n",
          n, seen, span / 1e6, busy / 1e6, small / 1e6, small / 1e3 / (double)n, n_large, large / 1e6);
  qsort(names, n_names, sizeof(ByName), by_total);
  for (size_t j = 0; j < n_names && j < 60; ++j) {
    const Kernel* l = names[j].last;
    fprintf(f,
            "%10.3f ms %7zu x %8.2f us, gap before %6.3f us; grid %u,%u,%u block %u,%u,%u regs %u smem %u "
            "(executed %u) local %u/%llu  %.100s\n",
            names[j].total_ns / 1e6, names[j].count, names[j].total_ns / 1e3 / (double)names[j].count,
            names[j].gap_ns / 1e3 / (double)names[j].count, l->grid[0], l->grid[1], l->grid[2], l->block[0],
            l->block[1], l->block[2], l->regs, l->smem, l->smem_executed, l->local_per_thread,
            (unsigned long long)l->local_total, names[j].name);
  }
  free(names);
  if (f != stderr) fclose(f);
}

__attribute__((constructor)) static void start_tracing(void) {
  const char* want = getenv("TRACE_PROGRAM");
  if (want) {
    char comm[64] = {0};
    FILE* c = fopen("/proc/self/comm", "r");
    if (c) {
      if (!fgets(comm, sizeof comm, c)) comm[0] = 0;
      fclose(c);
    }
    if (strncmp(comm, want, strlen(want)) != 0) return;
  }
  const char* last = getenv("TRACE_LAST");
  cap = last && atol(last) > 0 ? (size_t)atol(last) : 20000;
  ring = calloc(cap, sizeof(Kernel));
  if (!ring || cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(stderr, "kernel_timeline: CUPTI would not trace this process\n");
    return;
  }
  atexit(report);
}
