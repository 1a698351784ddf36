// Storage element type of the float tensors: float16_t when compiled with
// -DFP16 (16-bit storage buffers only; loads widen to float and all arithmetic
// stays float32, so only the stores round), float otherwise. Include right
// after #version: the extension directive must precede any declaration.
#ifdef FP16
#extension GL_EXT_shader_16bit_storage : require
#define elem_t float16_t
#else
#define elem_t float
#endif
