// Storage element type of the float tensors: float16_t when compiled with
// -DFP16 (16-bit storage buffers only; loads widen to float and all arithmetic
// stays float32, so only the stores round), float otherwise. Include right
// after #version: the extension directive must precede any declaration.
// raw_t is the unit the copy kernels (copy.comp, gather.comp) move without
// interpreting it: one uint16_t per float16 element, or a 32-bit word (one per
// 4-byte element, two per 8-byte element) otherwise.
#ifdef FP16
#extension GL_EXT_shader_16bit_storage : require
#define elem_t float16_t
#define raw_t uint16_t
#else
#define elem_t float
#define raw_t uint
#endif
