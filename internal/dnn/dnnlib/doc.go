// Package dnnlib holds what miotool's bindings to the DNN libraries
// (internal/dnn/cudnn, internal/dnn/miopen) share that is not a vendor's
// symbol name, constant, struct layout or argument order: loading and
// binding a library once per process with the record of every path tried
// (on top of internal/dl), the error a failed status becomes, the
// checks of sizes and geometry made before a call reaches the library, the
// lifetime of the handles and descriptors a library hands out, and binding
// the GPU runtime call that makes a device current on an OS thread.
//
// Package dnntest holds the bindings' shared test helpers and the header
// their C stand-ins share.
package dnnlib
