// Package dl finds, opens and binds shared libraries and calls C in them
// through purego: the search of a library's candidate paths with the
// record of every path tried (for `miotool doctor`), dlopen and dlerror
// kept on one OS thread, binding a table of symbols, and status-returning
// calls with C strings.
//
// It knows no vendor and no device; internal/hip/gpulib, the backends and
// the DNN bindings build on it.
package dl
