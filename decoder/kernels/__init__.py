"""kernels: the native CPU kernels: C++ sources, their build, the ctypes binding and the layout they read.

Owns the C++ sources (woq_kernel.cpp: int8 x quantized-weight products; row_kernel.cpp: row attention;
layer_kernel.cpp: norm, rotary embedding, SwiGLU; native_math.h), their build once per machine and instruction
set level and the loaded library's handle (woq_native), the levels themselves (isa) and the tiled weight layout
the kernel reads (woq_layout). The sources ship as package data and are found next to woq_native.py. May import
``decoder.weights``; never runtime or the decoders.
"""
