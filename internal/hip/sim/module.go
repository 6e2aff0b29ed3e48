package sim

import (
	"fmt"
	"maps"

	"miotool/internal/hip"
)

// module is a loaded kernel source: its entry points bound to Go twins.
type module struct {
	id     hip.Module
	name   string
	twins  map[string]hip.GoKernel
	fusion *hip.Fusion
	funcs  map[string]hip.Function
}

type function struct {
	id   hip.Function
	mod  *module
	name string
	twin hip.GoKernel
}

// ModuleLoad binds a kernel source. It fails with ErrInvalidImage unless
// every entry point has a Go twin.
func (d *Device) ModuleLoad(src *hip.KernelSource) (hip.Module, error) {
	const op = "ModuleLoad"
	if src == nil {
		return 0, d.newErr(op, hip.ErrInvalidValue, "kernel source is nil")
	}
	for _, k := range src.Kernels {
		if src.Twins[k] == nil {
			return 0, d.errf(op, hip.ErrInvalidImage, "kernel %q of source %q has no Go twin", k, src.Name)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	m := &module{
		id:     hip.Module(d.newHandleLocked()),
		name:   src.Name,
		twins:  make(map[string]hip.GoKernel, len(src.Kernels)),
		fusion: src.Fusion,
		funcs:  make(map[string]hip.Function),
	}
	// Bind the twins now so that later edits to src change nothing.
	for _, k := range src.Kernels {
		m.twins[k] = src.Twins[k]
	}
	d.modules[m.id] = m
	return m.id, nil
}

// ModuleGetFunction returns the entry point called name.
func (d *Device) ModuleGetFunction(h hip.Module, name string) (hip.Function, error) {
	const op = "ModuleGetFunction"
	if name == "" {
		return 0, d.newErr(op, hip.ErrInvalidValue, "kernel name is empty")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	m, ok := d.modules[h]
	if !ok {
		return 0, d.errf(op, hip.ErrInvalidHandle, "module %d does not exist", uintptr(h))
	}
	if f, ok := m.funcs[name]; ok {
		return f, nil
	}
	twin, ok := m.twins[name]
	if !ok {
		return 0, d.errf(op, hip.ErrNotFound, "module %q has no kernel %q", m.name, name)
	}
	f := &function{id: hip.Function(d.newHandleLocked()), mod: m, name: name, twin: twin}
	m.funcs[name] = f.id
	d.functions[f.id] = f
	return f.id, nil
}

// ModuleUnload releases a module and its functions. Graphs that captured
// its kernels keep their own reference to the twins.
func (d *Device) ModuleUnload(h hip.Module) error {
	const op = "ModuleUnload"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionModuleUnload); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	m, ok := d.modules[h]
	if !ok {
		return d.errf(op, hip.ErrInvalidHandle, "module %d does not exist", uintptr(h))
	}
	for f := range maps.Values(m.funcs) {
		delete(d.functions, f)
	}
	delete(d.modules, h)
	return nil
}

// LaunchKernel queues a kernel; its twin runs on the stream's goroutine.
// Arguments are copied now, so a captured launch replays with the values
// it was captured with.
func (d *Device) LaunchKernel(fh hip.Function, grid, block hip.Dim3, sharedMem uint32, s hip.Stream, args ...hip.KernelArg) error {
	const op = "LaunchKernel"
	if grid.Count() == 0 {
		return d.errf(op, hip.ErrInvalidValue, "grid %dx%dx%d has a zero dimension", grid.X, grid.Y, grid.Z)
	}
	if block.Count() == 0 {
		return d.errf(op, hip.ErrInvalidValue, "block %dx%dx%d has a zero dimension", block.X, block.Y, block.Z)
	}
	for i, a := range args {
		switch a.(type) {
		case hip.DevPtr, int32, uint32, int64, uint64, float32, float64:
		default:
			return d.errf(op, hip.ErrInvalidValue,
				"kernel argument %d has type %T (want hip.DevPtr, int32, uint32, int64, uint64, float32 or float64)", i, a)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	f, ok := d.functions[fh]
	if !ok {
		return d.errf(op, hip.ErrInvalidHandle, "function %d does not exist (unknown, or its module was unloaded)", uintptr(fh))
	}
	st, err := d.streamLocked(op, s)
	if err != nil {
		return err
	}
	name := f.name
	if f.mod.name != "" {
		name = fmt.Sprintf("%s.%s", f.mod.name, f.name)
	}
	n := &node{
		kind:   nodeKernel,
		name:   name,
		kernel: f.name,
		twin:   f.twin,
		fusion: f.mod.fusion,
		grid:   grid,
		block:  block,
		args:   append([]hip.KernelArg(nil), args...),
	}
	return d.submitLocked(op, st, n)
}
