// Package fdeep loads frugally-deep JSON models (MIOpen's *.tn.model and
// *.ktn.model files) and runs them in float32 on the CPU.
//
// A model file is one JSON object: a Keras functional architecture, the
// input and output shapes without the batch dimension, optional embedded
// tests, and the trainable parameters as lists of base64 strings holding
// little-endian float32 values. Load parses the file, resolves the layer
// graph into a flat list of operations over one scratch buffer, and runs
// the embedded tests the way MIOpen does (fdeep's load_model with verify
// on): an output that differs from the expected value by more than
// DefaultEpsilon (1e-4, fdeep's default verify epsilon, compared as an
// absolute difference, with NaN matching NaN) fails the load with a
// *SelfTestError naming the model and the largest deviation.
//
// Layers: InputLayer, Dense (applied per time step on [T][F] input), ReLU,
// Activation, LSTM (return_sequences, return_state, initial state from
// extra inbound tensors, go_backwards), Embedding, Add, Subtract, Multiply,
// Average, Maximum, Minimum, Concatenate, Reshape, Flatten, RepeatVector
// and Dropout (identity). Activations: linear, relu, sigmoid, hard_sigmoid,
// tanh, softmax, softplus, softsign, elu, selu, swish/silu, exponential.
//
// Weights live in memory of their own, mapped anonymously from the kernel
// (mmap) and made read-only once filled; Release unmaps it. (On systems
// other than Linux and macOS they stay on the Go heap and Release only
// marks the model; see WeightsUnmapOnRelease.) This is what
// lets miotool's pre-fix model cache reproduce MIOpen's use-after-free
// faithfully: a goroutine still running Predict on a released model reads
// unmapped pages and the Go runtime dies with "unexpected fault address".
// Predict does not check whether the model was released, on purpose: the
// C++ original does not either. A model that becomes unreachable without
// Release gives its memory back through a runtime cleanup.
//
// A loaded model is immutable and safe for concurrent Predict calls; each
// call borrows a pooled scratch buffer, so PredictInto does not allocate.
package fdeep
