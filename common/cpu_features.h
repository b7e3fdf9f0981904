// SPDX-License-Identifier: MIT
// Instruction-set extensions the codecs pick kernels by at run time: the
// binary is built for baseline x86-64 (it runs on any x86-64 machine), and
// the hot loops that gain from newer instructions are compiled a second
// time for them (__attribute__((target))) and chosen here.
#pragma once

namespace vramflow {

// Which build of a kernel runs. kAuto: the best this CPU runs well. The
// others are for tests and benchmarks, which compare them: every kernel
// gives the same bytes. kBmi2 needs CpuHasBmi2(), kAvx2 CpuHasAvx2(); a
// routine with no build for the one asked for runs its baseline build.
enum class IsaKernel { kAuto, kBaseline, kBmi2, kAvx2 };

// BMI2: shifts by a register count without the CL register (SHLX, SHRX),
// PEXT and PDEP.
inline bool CpuHasBmi2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}

// AVX2: 256-bit integer vectors.
inline bool CpuHasAvx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

// Whether `kernel` runs the BMI2 build (kAuto: where the CPU has BMI2).
inline bool UsesBmi2(IsaKernel kernel) {
  return kernel == IsaKernel::kBmi2 || (kernel == IsaKernel::kAuto && CpuHasBmi2());
}

// Whether `kernel` runs the AVX2 build (kAuto: where the CPU has AVX2).
inline bool UsesAvx2(IsaKernel kernel) {
  if (kernel != IsaKernel::kAuto) return kernel == IsaKernel::kAvx2;
  static const bool avx2 = CpuHasAvx2();  // a fact about the CPU, asked once
  return avx2;
}

// Whether this CPU can run `kernel`: kBmi2 needs BMI2, kAvx2 AVX2, the others
// run anywhere.
inline bool KernelRunsHere(IsaKernel kernel) {
  if (kernel == IsaKernel::kBmi2) return CpuHasBmi2();
  if (kernel == IsaKernel::kAvx2) return CpuHasAvx2();
  return true;
}

// BMI2 whose PEXT and PDEP are single fast instructions: AMD's before Zen 3
// (families 15h and 17h) microcode them into tens of cycles, slower than
// doing their work with shifts and masks.
inline bool CpuHasFastPextPdep() {
#if defined(__x86_64__)
  return CpuHasBmi2() && !__builtin_cpu_is("amdfam15h") && !__builtin_cpu_is("amdfam17h");
#else
  return false;
#endif
}

// Whether `kernel` runs the PEXT/PDEP build (kAuto: where they are fast).
inline bool UsesPextPdep(IsaKernel kernel) {
  if (kernel != IsaKernel::kAuto) return kernel == IsaKernel::kBmi2;
  static const bool fast = CpuHasFastPextPdep();  // a fact about the CPU, asked once
  return fast;
}

}  // namespace vramflow
