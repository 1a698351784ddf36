// Shared helpers. Elementwise shaders use 256 threads per group and a 2-D
// grid when the group count exceeds 65535.
uint global_index(uint wg) {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * wg;
}
