// Shared helpers. Elementwise shaders use 256 threads per group and a 2-D
// grid when the group count exceeds 65535.
uint global_index(uint wg) {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * wg;
}

// Fused epilogue of the GEMM/conv kernels. `act` is the ACT specialization
// constant: 0 none, else unary.comp's op code + 1 (so each activation is its
// own pipeline and the switch folds away). Parameters a, b come from the push
// constants. Same formulas as unary.comp, applied to the float32 value before
// the one rounding of the store.
float apply_act(float v, uint act, float a, float b) {
  switch (act) {
    case 1u: return max(v, 0.0);                           // Relu
    case 3u: return 1.0 / (1.0 + exp(-v));                 // Sigmoid
    case 11u: return min(max(v, a), b);                    // Clip
    case 12u: return v < 0.0 ? v * a : v;                  // LeakyRelu
    case 21u: return v * clamp(v / 6.0 + 0.5, 0.0, 1.0);   // HardSwish
    default: return v;
  }
}
