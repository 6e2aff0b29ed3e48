package sim

import (
	"unsafe"

	"miotool/internal/hip"
)

// hostMemory is the simulated device's pinned host memory: what HostAlloc
// allocated, by address (the map keeps it alive), and what HostRegister
// registered, base address to length. Guarded by Device.mu.
type hostMemory struct {
	allocs     map[uintptr][]byte
	registered map[uintptr]int
}

func newHostMemory() hostMemory {
	return hostMemory{allocs: map[uintptr][]byte{}, registered: map[uintptr]int{}}
}

func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// HostAlloc allocates "pinned" host memory. The capture rules come first,
// as for Malloc: a refused call refuses whatever its size.
func (d *Device) HostAlloc(bytes int) ([]byte, error) {
	const op = "HostAlloc"
	if err := d.alive(op); err != nil {
		return nil, err
	}
	if err := d.guardDevice(op, ActionHostAlloc); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, d.errf(op, hip.ErrInvalidValue, "size %d must be positive", bytes)
	}
	b := make([]byte, bytes)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.host.allocs[base(b)] = b
	return b, nil
}

// HostFree frees what HostAlloc allocated.
func (d *Device) HostFree(b []byte) error {
	const op = "HostFree"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionHostFree); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) == 0 {
		return d.errf(op, hip.ErrInvalidValue, "the host memory to free is empty")
	}
	if _, ok := d.host.allocs[base(b)]; !ok {
		return d.errf(op, hip.ErrInvalidValue, "host address %#x is not the start of pinned memory HostAlloc allocated", base(b))
	}
	delete(d.host.allocs, base(b))
	return nil
}

// HostRegister registers host memory; a range that overlaps one already
// registered is refused, as the runtimes refuse it.
func (d *Device) HostRegister(b []byte) error {
	const op = "HostRegister"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionHostRegister); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) == 0 {
		return d.errf(op, hip.ErrInvalidValue, "the host memory to register is empty")
	}
	lo, hi := base(b), base(b)+uintptr(len(b))
	for at, n := range d.host.registered {
		if lo < at+uintptr(n) && at < hi {
			return d.errf(op, hip.ErrHostMemoryRegistered, "host range %#x+%d overlaps the registered %#x+%d", lo, len(b), at, n)
		}
	}
	d.host.registered[lo] = len(b)
	return nil
}

// HostUnregister unregisters what HostRegister registered, by its start.
func (d *Device) HostUnregister(b []byte) error {
	const op = "HostUnregister"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionHostUnregister); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) == 0 {
		return d.errf(op, hip.ErrInvalidValue, "the host memory to unregister is empty")
	}
	if _, ok := d.host.registered[base(b)]; !ok {
		return d.errf(op, hip.ErrHostMemoryNotRegistered, "host address %#x is not the start of a registered range", base(b))
	}
	delete(d.host.registered, base(b))
	return nil
}
