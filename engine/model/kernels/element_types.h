// What Lathe's CUDA kernels (engine/model/*.cu) share with their LibTorch-side launchers, in plain
// types so that the .cu files need no LibTorch header (nvcc compiles them alone): the element types
// they take.
#pragma once

namespace lathe::model::kernels {

enum class ElementType { float32, bfloat16, float16 };

}  // namespace lathe::model::kernels
