// cuDNN's graph API (the backend descriptors of cudnn_graph.h), for fused operation graphs that
// the legacy calls cannot express: a convolution with its bias and relu in the epilogue, mixed
// dtypes (a bf16 convolution writing an f32 filter gradient), statistics in the epilogue.
//   - CudnnGraph collects tensors (by unique id) and operations, finalizes the operation graph,
//     asks cuDNN's heuristics (mode A) for its ranked engine configurations, and finalizes
//     execution plans for the ones the caller tries: all at plan time, in a kernel's constructor;
//   - run() executes the selected plan on the backend's stream with a variant pack that is made
//     once for a set of pointers and reused while they stay the same (a step binds its buffers
//     once, so a step makes no descriptor; the variant pack is host memory, no GPU work).
// No C++ frontend: cuDNN's frontend is header-only source that Debian does not ship, and its
// graphs are a few dozen attribute calls each. Errors: set-up failures throw RuntimeError naming
// the attribute; finalize/plan failures return false (the caller falls back to the legacy calls).
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainer::cuda {

// One backend descriptor, destroyed with the object.
class BackendDesc {
 public:
  BackendDesc() = default;
  explicit BackendDesc(cudnnBackendDescriptorType_t type);
  ~BackendDesc();
  BackendDesc(BackendDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  BackendDesc& operator=(BackendDesc&& o) noexcept;
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  // Throws RuntimeError naming `what` when cuDNN refuses the attribute.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* value, const char* what);
  void set_i64(cudnnBackendAttributeName_t name, int64_t v, const char* what) {
    set(name, CUDNN_TYPE_INT64, 1, &v, what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const BackendDesc& d, const char* what) {
    cudnnBackendDescriptor_t p = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p, what);
  }
  cudnnStatus_t finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A 4-D tensor of the graph: logical dims (N, C, H, W) with strides, so that NHWC storage, a
// (K, R, S, C) or (K, C, R, S) filter and a (1, C, 1, 1) per-channel vector are all the same call.
struct GraphTensor {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::array<int64_t, 4> dims{}, strides{};
  bool is_virtual = false;  // an intermediate that never reaches memory
};
// Strides of (n, c, h, w) stored channels-last (NHWC) and plain (NCHW).
std::array<int64_t, 4> nhwc_strides(int64_t n, int64_t c, int64_t h, int64_t w);
std::array<int64_t, 4> nchw_strides(int64_t n, int64_t c, int64_t h, int64_t w);

// A 2-D cross-correlation's padding (the same before and after) and strides; dilation 1.
struct GraphConv {
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
};

// The memory of a graph's non-virtual tensors, by uid: a fixed list, so that running a graph in
// a step allocates nothing on the host.
struct GraphPointers {
  static constexpr int kMax = 8;
  std::array<int64_t, kMax> uid{};
  std::array<void*, kMax> data{};
  int n = 0;
  GraphPointers() = default;
  GraphPointers(std::initializer_list<std::pair<int64_t, const void*>> list) {
    for (const auto& p : list) add(p.first, p.second);
  }
  void add(int64_t id, const void* p);  // InternalError past kMax
  bool operator==(const GraphPointers& o) const {
    if (n != o.n) return false;
    for (int i = 0; i < n; ++i)
      if (uid[size_t(i)] != o.uid[size_t(i)] || data[size_t(i)] != o.data[size_t(i)]) return false;
    return true;
  }
  bool operator!=(const GraphPointers& o) const { return !(*this == o); }
};

class CudnnGraph {
 public:
  explicit CudnnGraph(cudnnHandle_t handle) : handle_(handle) {}
  CudnnGraph(const CudnnGraph&) = delete;
  CudnnGraph& operator=(const CudnnGraph&) = delete;

  // Graph building (before finalize): tensors first, then the operations that use them.
  void tensor(const GraphTensor& t);
  // y = conv(x, w), f32 accumulation.
  void conv_fprop(int64_t x, int64_t w, int64_t y, const GraphConv& g);
  // dw = the filter gradient of y = conv(x, w) given dy.
  void conv_wgrad(int64_t x, int64_t dy, int64_t dw, const GraphConv& g);
  // out = in + in2 (CUDNN_POINTWISE_ADD), out = max(in, 0) (CUDNN_POINTWISE_RELU_FWD, in2 < 0), in
  // f32 math.
  void pointwise(cudnnPointwiseMode_t mode, int64_t in, int64_t in2, int64_t out);
  // Per-channel sum and sum of squares of x (CUDNN_GENSTATS_SUM_SQSUM), f32.
  void genstats(int64_t x, int64_t sum, int64_t sqsum);

  // Finalizes the operation graph and asks the heuristics for its engine configurations, best
  // first: how many (0 when cuDNN supports the graph on none; *why says why).
  int finalize(std::string* why);
  // Finalizes the execution plan of configuration i (i < finalize()'s count); false when cuDNN
  // cannot run it here or it needs more than max_ws bytes of workspace (*why says which). The
  // plans made are kept: plan_count(), select().
  bool make_plan(int i, size_t max_ws, std::string* why);
  // Plans for the first `want` configurations that build (make_plan on each in turn), the first
  // `want` finalized in parallel threads: finalizing a runtime-compiled engine compiles its kernel
  // (NVRTC), a few hundred milliseconds each; precompiled_only skips such engines. *why collects
  // the failures, "; "-separated. Returns plan_count().
  int make_plans(int want, size_t max_ws, std::string* why, bool precompiled_only = false);
  // A plan from its JSON (plan_json): no operation graph or heuristics needed, and a
  // runtime-compiled engine's kernel comes with it instead of being compiled again (NVRTC: 0.1-1 s
  // a kernel). False when cuDNN refuses it here (another GPU or cuDNN wrote it) or it needs more
  // than max_ws bytes of workspace.
  bool load_plan(const std::string& json, size_t max_ws, std::string* why);
  // Plan p serialized (cuDNN's JSON; empty when cuDNN cannot serialize its engine).
  std::string plan_json(int p) const;
  int plan_count() const { return int(plans_.size()); }
  // The configuration index of plan p (-1 for a loaded one), and its workspace bytes.
  int plan_config(int p) const { return plans_[size_t(p)].config; }
  size_t plan_workspace(int p) const { return plans_[size_t(p)].workspace; }
  // The largest workspace of the plans made (0 without plans): one buffer that runs any of them.
  size_t max_plan_workspace() const {
    size_t m = 0;
    for (const Plan& p : plans_) m = std::max(m, p.workspace);
    return m;
  }
  // "engine 12 (knobs 1=2 3=0)" for logs.
  std::string plan_name(int p) const { return plans_[size_t(p)].name; }
  // The plan run() executes (the last one made, until select()).
  void select(int p) { selected_ = p; }
  int selected() const { return selected_; }

  // Executes the selected plan on the handle's stream: ptrs maps each non-virtual tensor's uid
  // to its memory; workspace holds plan_workspace(selected()) bytes. The variant pack is remade
  // only when a pointer changes. Throws RuntimeError when cuDNN fails.
  void run(const GraphPointers& ptrs, void* workspace);
  // The same, returning cuDNN's status instead of throwing (plan-time trials).
  cudnnStatus_t try_run(const GraphPointers& ptrs, void* workspace);

 private:
  struct Plan {
    int config = 0;
    size_t workspace = 0;
    std::string name;
    BackendDesc plan;
  };
  const BackendDesc& find(int64_t uid, const char* what) const;
  // Finalizes p.plan (its configuration or JSON set): false with *why otherwise. keep_plan keeps
  // a finalized one.
  bool finalize_plan(Plan& p, size_t max_ws, std::string* why) const;
  void keep_plan(Plan p);
  Plan config_plan(int i) const;
  BackendDesc conv_desc(const GraphConv& g) const;

  cudnnHandle_t handle_;
  std::vector<std::pair<int64_t, BackendDesc>> tensors_;
  std::vector<BackendDesc> helpers_;  // convolution and pointwise descriptors the ops reference
  std::vector<BackendDesc> ops_;
  BackendDesc graph_;
  std::vector<BackendDesc> configs_;  // the heuristics' ranking
  std::vector<Plan> plans_;
  int selected_ = -1;
  // The variant pack of the last run and what it was made for.
  BackendDesc pack_;
  int pack_plan_ = -1;
  GraphPointers pack_ptrs_;
  void* pack_ws_ = nullptr;
};

}  // namespace trainer::cuda
