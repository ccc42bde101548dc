// SPDX-License-Identifier: Apache-2.0
// Records the TensorFlow release this library was compiled against, as a
// plain string in the binary.  The Python loader reads it from the file
// before loading it, so a mismatch gives a clear message instead of an
// undefined-symbol error (or worse, a library that loads and then crashes).
// setup.py defines TF_TRANSDUCER_TF_VERSION from the TensorFlow it builds with.

#ifndef TF_TRANSDUCER_TF_VERSION
#error "TF_TRANSDUCER_TF_VERSION must be defined by the build (see setup.py)"
#endif

extern "C" __attribute__((used, visibility("default")))
const char kTfTransducerBuildInfo[] =
    "tf_transducer-built-for-tensorflow=" TF_TRANSDUCER_TF_VERSION;

// Whether the GPU kernels are in the library (TT_CUDA=1 in setup.py), for
// the loader's messages.
#if TF_TRANSDUCER_CUDA
extern "C" __attribute__((used, visibility("default")))
const char kTfTransducerBuildDevices[] = "tf_transducer-devices=cpu,gpu";
#else
extern "C" __attribute__((used, visibility("default")))
const char kTfTransducerBuildDevices[] = "tf_transducer-devices=cpu";
#endif
