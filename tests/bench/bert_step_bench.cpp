// Time of one training step (zero_grad, forward, backward, optimizer step) of the models the
// recipes train, with --threads GEMM threads (default 1; the trainer gives each rank cores/ranks).
// tests/bench/bert_step_torch.py is the same step in PyTorch 1.13, and tests/bench/bert_step.sh
// runs the two in alternation at equal threads.
//
//   bert_step_bench [--reps N] [--warmup N] [--model bert|mlp|gpt|all] [--phases]
//                   [--device cpu|cuda] [--batch N] [--peak-tflops X] [--threads N] [--label S]
//                   [--precision fp32|bf16]
//
// - bert: workloads/models/bert.h, BERT-small (the cross_dc recipes' width; vocab 4000, seq_len 128, dim 128,
//   2 layers, 4 heads, ffn 512, dropout 0.1), 32 sequences per step, 19 of the 128 positions of
//   each sequence (15%, rounded down) as targets, LAMB with its defaults (no gradient clipping).
// - mlp: 784-512-256-10 ReLU at batch 256, SGD momentum 0.9, weight decay 5e-4.
// - gpt: workloads/models/gpt.h at the gpt_fortunes size (vocab 4000, seq_len 128, dim 192,
//   4 layers, 6 heads, ffn 768, no dropout), 16 sequences per step, every position a target,
//   AdamW (beta2 0.95, weight decay 0.1 on the decay group).
//
// One row per model: ms/step (mean, min and median over N timed steps after the warm-ups) and
// GFLOP/s = flops_per_example() x batch / mean step time. BERT's flops_per_example counts the MLM
// head at every position (an upper bound; see bert.h), so its row also gives the GFLOP/s of the
// work actually done, with the tied projection counted on the predicted positions only.
// --phases adds the mean time of each part of the step (forward, backward, optimizer).
// On cpu each row also gives the model GFLOP/s as a percentage of the fp32 FMA peak of --threads
// threads, measured at start (core/ops/cpu_peak.h; printed with the GEMM library on a # line).
//
// --device cuda moves each model to the GPU after init (the same layers, ops::kernels picks the
// CUDA kernels; the optimizers update the device buffers) and waits for the device at the end of
// each phase, so the times are the device's. It adds a line per model with TFLOP/s and the MFU
// against --peak-tflops (default on cuda: 67, an H100/H200 SXM's dense FP32 peak without tensor
// cores, which is what plain-FP32 cuBLAS runs on). --batch N overrides the batch size (BERT
// sequences or MLP examples), e.g. to fill a large GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/device.h"
#include "core/rng.h"
#include "core/step.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
#include "core/ops/cpu_peak.h"
#include "core/ops/ops.h"
#include "optimizers/adamw.h"
#include "workloads/models/mlp.h"
#include "optimizers/lamb.h"
#include "optimizers/sgd.h"

namespace {

using namespace laconic;
using Clock = std::chrono::steady_clock;

struct Args {
  int reps = 20;
  int warmup = 3;
  std::string model = "all";
  bool phases = false;
  Device device = Device::cpu;
  int batch = 0;             // 0: each model's default
  double peak_tflops = 0.0;  // 0: 67 on cuda, none on cpu
  double cpu_peak_gflops = 0.0;  // on cpu: the fp32 FMA peak of --threads threads, measured at start
  int threads = 1;           // CPU GEMM threads
  std::string label = "laconic";
  nn::Precision precision = nn::Precision::fp32;  // the models' GEMMs (train.precision)
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "bert_step_bench: %s\nusage: bert_step_bench [--reps N] [--warmup N] "
               "[--model bert|mlp|gpt|all] [--phases] [--device cpu|cuda] [--batch N] "
               "[--peak-tflops X] [--threads N] [--label S] [--precision fp32|bf16]\n", msg);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    // "--name value" or "--name=value".
    std::string s = argv[i];
    std::string inline_value;
    bool has_inline = false;
    if (const auto eq = s.find('='); s.starts_with("--") && eq != std::string::npos) {
      inline_value = s.substr(eq + 1);
      s.resize(eq);
      has_inline = true;
    }
    auto value = [&]() -> const char* {
      if (has_inline) return inline_value.c_str();
      if (i + 1 >= argc) usage(("missing value after " + s).c_str());
      return argv[++i];
    };
    if (s == "--reps") a.reps = std::max(1, std::atoi(value()));
    else if (s == "--warmup") a.warmup = std::max(0, std::atoi(value()));
    else if (s == "--model") a.model = value();
    else if (s == "--phases") a.phases = true;
    else if (s == "--device") {
      const std::string d = value();
      if (d != "cpu" && d != "cuda") usage("--device is cpu or cuda");
      a.device = d == "cuda" ? Device::cuda : Device::cpu;
    } else if (s == "--batch") a.batch = std::max(1, std::atoi(value()));
    else if (s == "--peak-tflops") a.peak_tflops = std::atof(value());
    else if (s == "--threads") a.threads = std::max(1, std::atoi(value()));
    else if (s == "--label") a.label = value();
    else if (s == "--precision") {
      const std::string p = value();
      if (p != "fp32" && p != "bf16") usage("--precision is fp32 or bf16");
      a.precision = p == "bf16" ? nn::Precision::bf16 : nn::Precision::fp32;
    }
    else usage(("unknown argument " + s).c_str());
  }
  if (a.device == Device::cuda && !cuda_available())
    usage(built_with_cuda() ? "--device cuda: no CUDA device" : "--device cuda: built without CUDA");
  if (a.device == Device::cuda && a.peak_tflops <= 0.0) a.peak_tflops = 67.0;
  if (a.model != "bert" && a.model != "mlp" && a.model != "gpt" && a.model != "all")
    usage("--model is bert, mlp, gpt or all");
  return a;
}

struct Timings {
  std::vector<double> step;               // seconds per timed step
  double forward = 0, backward = 0, optimizer = 0;  // summed over timed steps
};

// Runs warmup + reps steps; the warm-up steps size every activation buffer and the optimizer's
// state, so the timed steps are training's steady state (no allocation, warm caches).
Timings run_steps(Model& model, Optimizer& opt, const Batch& batch, double lr, const Args& args) {
  Timings t;
  ForwardOptions fo;
  fo.seed = 1;
  for (int s = 0; s < args.warmup + args.reps; ++s) {
    fo.step = s;  // new dropout masks every step, as in training
    const auto t0 = Clock::now();
    model.params().zero_grad();
    model.forward(batch, fo);  // on cuda it waits for the device (the loss comes back)
    const auto t1 = Clock::now();
    model.backward();
    synchronize(args.device);  // kernels are queued asynchronously: time their completion
    const auto t2 = Clock::now();
    opt.step(model.params(), lr);
    synchronize(args.device);
    const auto t3 = Clock::now();
    if (s < args.warmup) continue;
    t.step.push_back(std::chrono::duration<double>(t3 - t0).count());
    t.forward += std::chrono::duration<double>(t1 - t0).count();
    t.backward += std::chrono::duration<double>(t2 - t1).count();
    t.optimizer += std::chrono::duration<double>(t3 - t2).count();
  }
  return t;
}

void report(const char* name, int batch, double flops_per_step, double useful_flops_per_step,
            const Timings& t, const Args& args) {
  std::vector<double> s = t.step;
  std::sort(s.begin(), s.end());
  const double mean = std::accumulate(s.begin(), s.end(), 0.0) / s.size();
  const double median = s[s.size() / 2];
  const double gflops = flops_per_step / mean / 1e9;
  std::printf("%-8s %-5s %6d %10.2f %10.2f %10.2f %10.1f %10.1f %8.1f %8.1f\n", args.label.c_str(), name, batch,
              mean * 1e3, s.front() * 1e3, median * 1e3, gflops, useful_flops_per_step / mean / 1e9,
              args.cpu_peak_gflops > 0 ? 100.0 * gflops / args.cpu_peak_gflops : 0.0, args.cpu_peak_gflops);
  if (args.phases) {
    const double n = static_cast<double>(s.size());
    std::printf("#   %s phases (ms/step): forward %.2f  backward %.2f  optimizer %.2f\n", name,
                t.forward / n * 1e3, t.backward / n * 1e3, t.optimizer / n * 1e3);
  }
  if (args.peak_tflops > 0.0) {
    const double tflops = flops_per_step / mean / 1e12, done = useful_flops_per_step / mean / 1e12;
    std::printf("#   %s on %s: %.2f TFLOP/s (model), %.2f TFLOP/s (done); MFU %.1f%% (model), "
                "%.1f%% (done) of %.1f TFLOP/s\n", name, name_of(args.device), tflops, done,
                100.0 * tflops / args.peak_tflops, 100.0 * done / args.peak_tflops, args.peak_tflops);
  }
  std::fflush(stdout);
}

void bench_bert(const Args& args) {
  BertOptions o;
  o.precision = args.precision;
  o.vocab = 4000;
  o.seq_len = 128;
  o.dim = 128;
  o.layers = 2;
  o.heads = 4;
  o.ffn = 512;
  o.dropout = 0.1f;
  const int batch_size = args.batch > 0 ? args.batch : 32;
  const int predicted = o.seq_len * 15 / 100;  // 19 per sequence

  auto model = std::make_unique<Bert>(o);
  model->init(1);
  model->to(args.device);
  Batch batch;
  batch.size = batch_size;
  batch.seq_len = o.seq_len;
  const std::size_t n = static_cast<std::size_t>(batch_size) * o.seq_len;
  batch.tokens.resize(n);
  batch.targets.assign(n, -1);
  const auto key = rng::key({7, rng::kTest});
  for (std::size_t i = 0; i < n; ++i)
    batch.tokens[i] = static_cast<std::int32_t>(rng::below(key, i, o.vocab));
  // The first `predicted` entries of a seeded Fisher-Yates shuffle of each sequence's positions.
  std::vector<int> pos(o.seq_len);
  for (int b = 0; b < batch_size; ++b) {
    std::iota(pos.begin(), pos.end(), 0);
    for (int i = 0; i < predicted; ++i) {
      const auto j = i + static_cast<int>(rng::below(key, n + b * o.seq_len + i, o.seq_len - i));
      std::swap(pos[i], pos[j]);
      const std::size_t r = static_cast<std::size_t>(b) * o.seq_len + pos[i];
      batch.targets[r] = static_cast<std::int32_t>(rng::below(key, 2 * n + r, o.vocab));
    }
  }

  Lamb lamb(LambOptions{});
  const Timings t = run_steps(*model, lamb, batch, 1e-3, args);
  // The head's tied projection (6 dim vocab per position in flops_per_example) runs on the
  // predicted positions only.
  const double flops = model->flops_per_example() * batch_size;
  const double head_all = 6.0 * o.dim * o.vocab * static_cast<double>(n);
  const double head_done = 6.0 * o.dim * o.vocab * predicted * batch_size;
  report("bert", batch_size, flops, flops - head_all + head_done, t, args);
}

void bench_mlp(const Args& args) {
  MlpOptions o;  // 784-512-256-10 ReLU
  o.precision = args.precision;
  const int batch_size = args.batch > 0 ? args.batch : 256;
  auto model = std::make_unique<Mlp>(o);
  model->init(1);
  model->to(args.device);
  Batch batch;
  batch.size = batch_size;
  batch.features = o.inputs;
  batch.inputs.resize(static_cast<std::size_t>(batch_size) * o.inputs);
  batch.targets.resize(batch_size);
  const auto key = rng::key({8, rng::kTest});
  for (std::size_t i = 0; i < batch.inputs.size(); ++i) batch.inputs[i] = rng::uniform(key, i);
  for (int i = 0; i < batch_size; ++i)
    batch.targets[i] = static_cast<std::int32_t>(rng::below(key, batch.inputs.size() + i, o.classes));

  SgdOptions so;
  so.momentum = 0.9;
  so.weight_decay = 5e-4;
  Sgd sgd(so);
  const Timings t = run_steps(*model, sgd, batch, 0.05, args);
  const double flops = model->flops_per_example() * batch_size;
  report("mlp", batch_size, flops, flops, t, args);
}

void bench_gpt(const Args& args) {
  GptOptions o;
  o.precision = args.precision;
  o.vocab = 4000;
  o.seq_len = 128;
  o.dim = 192;
  o.layers = 4;
  o.heads = 6;
  o.ffn = 768;
  o.dropout = 0.0f;
  const int batch_size = args.batch > 0 ? args.batch : 16;
  auto model = std::make_unique<Gpt>(o);
  model->init(1);
  model->to(args.device);
  Batch batch;
  batch.size = batch_size;
  batch.seq_len = o.seq_len;
  const std::size_t n = static_cast<std::size_t>(batch_size) * o.seq_len;
  batch.tokens.resize(n);
  batch.targets.resize(n);
  const auto key = rng::key({9, rng::kTest});
  for (std::size_t i = 0; i < n; ++i) {
    batch.tokens[i] = static_cast<std::int32_t>(rng::below(key, i, o.vocab));
    batch.targets[i] = static_cast<std::int32_t>(rng::below(key, n + i, o.vocab));
  }
  AdamW adamw(AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  const Timings t = run_steps(*model, adamw, batch, 1e-3, args);
  const double flops = model->flops_per_example() * batch_size;
  report("gpt", batch_size, flops, flops, t, args);
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  ops::cpu::set_gemm_threads(args.threads);
  if (args.device == Device::cpu) {
    const ops::cpu::CpuPeak peak = ops::cpu::measure_cpu_peak(args.threads, 0.3);
    args.cpu_peak_gflops = peak.fp32_total_gflops;
    std::printf("# %s; fp32 peak of %d thread(s) (%s FMA, measured now): %.1f GFLOP/s; bf16 dot peak %.1f\n",
                ops::cpu::gemm_library().c_str(), args.threads, peak.isa.c_str(), peak.fp32_total_gflops,
                peak.bf16_total_gflops);
  }
  std::printf("%-8s %-5s %6s %10s %10s %10s %10s %10s %8s %8s\n", "impl", "model", "batch", "ms/step", "min ms",
              "median ms", "GFLOP/s", "done GF/s", "%peak", "peak");
  if (args.model == "bert" || args.model == "all") bench_bert(args);
  if (args.model == "mlp" || args.model == "all") bench_mlp(args);
  if (args.model == "gpt" || args.model == "all") bench_gpt(args);
  return 0;
}
