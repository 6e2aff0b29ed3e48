package sim

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"unsafe"

	"miotool/internal/hip"
)

const (
	// allocAlign is the alignment of every device address Malloc returns.
	allocAlign = 256
	// firstDevAddr is where device addresses start; it keeps them far from
	// zero and from host-looking values.
	firstDevAddr hip.DevPtr = 0x7f00_0000_0000
)

// allocation is one Malloc'd block. data is 8-byte aligned Go memory.
type allocation struct {
	base hip.DevPtr
	size int
	data []byte
}

// memory is the device's address space. Addresses are never reused, and a
// 256-byte gap follows every block, so a kernel that runs past a buffer or
// uses a freed one hits no allocation and faults.
type memory struct {
	dialect hip.Dialect // names the errors kernels see
	mu      sync.RWMutex
	next    hip.DevPtr
	used    uint64
	total   uint64
	allocs  []*allocation // sorted by base
}

var _ hip.Memory = (*memory)(nil)

func newMemory(total uint64, d hip.Dialect) *memory {
	return &memory{dialect: d, next: firstDevAddr, total: total}
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// alloc returns a fresh zeroed block; ok is false when it would exceed the
// device's memory.
func (m *memory) alloc(n int) (hip.DevPtr, bool) {
	rounded := roundUp(uint64(n), allocAlign)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used+rounded > m.total {
		return 0, false
	}
	words := make([]uint64, (n+7)/8)
	a := &allocation{base: m.next, size: n, data: unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)}
	adviseHugePages(a.data)
	m.next += hip.DevPtr(rounded + allocAlign)
	m.used += rounded
	m.allocs = append(m.allocs, a)
	return a.base, true
}

// indexOf finds the allocation holding address p; -1 when none does.
func (m *memory) indexOf(p hip.DevPtr) int {
	i := sort.Search(len(m.allocs), func(i int) bool { return m.allocs[i].base > p }) - 1
	if i < 0 {
		return -1
	}
	a := m.allocs[i]
	if p >= a.base+hip.DevPtr(a.size) {
		return -1
	}
	return i
}

// isBase reports whether p is the start of a live allocation.
func (m *memory) isBase(p hip.DevPtr) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := m.indexOf(p)
	return i >= 0 && m.allocs[i].base == p
}

// release frees the allocation starting at p.
func (m *memory) release(p hip.DevPtr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.indexOf(p)
	if i < 0 || m.allocs[i].base != p {
		return false
	}
	m.used -= roundUp(uint64(m.allocs[i].size), allocAlign)
	m.allocs = append(m.allocs[:i], m.allocs[i+1:]...)
	return true
}

// inUse is the bytes and blocks allocated and not freed.
func (m *memory) inUse() (bytes int64, blocks int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, a := range m.allocs {
		bytes += int64(a.size)
	}
	return bytes, len(m.allocs)
}

// MemoryInUse is what Malloc handed out and Free has not taken back: the
// bytes asked for and the number of blocks. Tests of teardown check it is
// zero, so a leak shows at the device and not only in a caller's counters.
func (d *Device) MemoryInUse() (bytes int64, blocks int) { return d.mem.inUse() }

// span returns the n bytes at p, which must lie inside one allocation. The
// slice's capacity ends with the range, so appending cannot reach past it.
func (m *memory) span(p hip.DevPtr, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative length %d at device address %#x", n, uint64(p))
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := m.indexOf(p)
	if i < 0 {
		return nil, fmt.Errorf("device address %#x is not inside any allocation (out of range or freed)", uint64(p))
	}
	a := m.allocs[i]
	off := int(p - a.base)
	if n > a.size-off {
		return nil, fmt.Errorf("%d bytes at device address %#x run past the end of the %d-byte allocation at %#x",
			n, uint64(p), a.size, uint64(a.base))
	}
	return a.data[off : off+n : off+n], nil
}

// Bytes gives a kernel the n bytes at p; a bad range is an illegal address.
func (m *memory) Bytes(p hip.DevPtr, n int) ([]byte, error) {
	b, err := m.span(p, n)
	if err != nil {
		return nil, &hip.Error{Op: "LaunchKernel", Code: hip.ErrIllegalAddress, Dialect: m.dialect, Detail: err.Error()}
	}
	return b, nil
}

// Float32s gives a kernel n float32 values at p.
func (m *memory) Float32s(p hip.DevPtr, n int) ([]float32, error) {
	if p%4 != 0 {
		return nil, &hip.Error{Op: "LaunchKernel", Code: hip.ErrIllegalAddress, Dialect: m.dialect,
			Detail: fmt.Sprintf("device address %#x is not 4-byte aligned for float32 access", uint64(p))}
	}
	if n < 0 || n > math.MaxInt/4 {
		return nil, &hip.Error{Op: "LaunchKernel", Code: hip.ErrIllegalAddress, Dialect: m.dialect,
			Detail: fmt.Sprintf("float32 count %d is out of range", n)}
	}
	b, err := m.Bytes(p, 4*n)
	if err != nil || n == 0 {
		return nil, err
	}
	// Blocks are 8-byte aligned Go memory and p is 4-byte aligned, so the
	// view is aligned.
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
}

// Malloc allocates bytes of device memory at a 256-byte aligned address.
func (d *Device) Malloc(bytes int) (hip.DevPtr, error) {
	const op = "Malloc"
	if err := d.alive(op); err != nil {
		return 0, err
	}
	if err := d.guardDevice(op, ActionMalloc); err != nil {
		return 0, err
	}
	if bytes <= 0 {
		return 0, d.errf(op, hip.ErrInvalidValue, "size %d must be positive", bytes)
	}
	if err := d.injectedCallFailure(op, 0); err != nil {
		return 0, err
	}
	if uint64(bytes) > TotalMemory {
		return 0, d.errf(op, hip.ErrOutOfMemory, "size %d exceeds the device's %d bytes", bytes, uint64(TotalMemory))
	}
	p, ok := d.mem.alloc(bytes)
	if !ok {
		return 0, d.errf(op, hip.ErrOutOfMemory, "no room for %d more bytes on the %d-byte device", bytes, uint64(TotalMemory))
	}
	return p, nil
}

// Free releases an allocation. Like hipFree and cuMemFree it first waits
// for every stream of the device to drain.
func (d *Device) Free(p hip.DevPtr) error {
	const op = "Free"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionFree); err != nil {
		return err
	}
	if c, ok := d.faults.takeFreeFailure(); ok {
		return d.errf(op, c, "injected free failure; %#x stays allocated", uint64(p))
	}
	if !d.mem.isBase(p) {
		return d.errf(op, hip.ErrInvalidValue, "device address %#x is not the start of a live allocation", uint64(p))
	}
	d.drainAll()
	if !d.mem.release(p) {
		return d.errf(op, hip.ErrInvalidValue, "device address %#x was freed concurrently", uint64(p))
	}
	return nil
}

var _ hip.HostMapper = (*Device)(nil)

// HostAllocMapped allocates device memory and returns its host view too:
// the simulator's device memory is host memory, so a Go kernel's write is
// seen at Host (through atomic loads, if the kernel stores atomically).
func (d *Device) HostAllocMapped(bytes int) (hip.HostMapped, error) {
	p, err := d.Malloc(bytes)
	if err != nil {
		return hip.HostMapped{}, err
	}
	b, err := d.mem.span(p, bytes)
	if err != nil {
		_ = d.Free(p)
		return hip.HostMapped{}, d.newErr("HostAllocMapped", hip.ErrInvalidValue, err.Error())
	}
	return hip.HostMapped{Host: unsafe.Pointer(&b[0]), Dev: p, Bytes: bytes}, nil
}

// HostFreeMapped frees what HostAllocMapped allocated.
func (d *Device) HostFreeMapped(m hip.HostMapped) error { return d.Free(m.Dev) }

// Memset is the synchronous byte memset. All simulated streams are
// non-blocking, so it does not wait for them.
func (d *Device) Memset(p hip.DevPtr, value byte, bytes int) error {
	b, err := d.syncSpan("Memset", ActionSyncMemset, p, bytes)
	if err == nil {
		fill(b, value)
	}
	return err
}

// MemcpyHtoD is the synchronous host-to-device copy.
func (d *Device) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	b, err := d.syncSpan("MemcpyHtoD", ActionSyncMemcpy, dst, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}

// MemcpyDtoH is the synchronous device-to-host copy.
func (d *Device) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	b, err := d.syncSpan("MemcpyDtoH", ActionSyncMemcpy, src, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

// syncSpan is the device memory a synchronous call touches, once the
// device is alive, the capture rules let the call through and no earlier
// error is sticky.
func (d *Device) syncSpan(op string, act Action, p hip.DevPtr, bytes int) ([]byte, error) {
	if err := d.alive(op); err != nil {
		return nil, err
	}
	if err := d.guardDevice(op, act); err != nil {
		return nil, err
	}
	if err := d.stickyErr(op); err != nil {
		return nil, err
	}
	b, err := d.mem.span(p, bytes)
	if err != nil {
		return nil, d.newErr(op, hip.ErrInvalidValue, err.Error())
	}
	return b, nil
}

// MemsetAsync queues a byte memset on s.
func (d *Device) MemsetAsync(p hip.DevPtr, value byte, bytes int, s hip.Stream) error {
	const op = "MemsetAsync"
	if _, err := d.mem.span(p, bytes); err != nil {
		return d.newErr(op, hip.ErrInvalidValue, err.Error())
	}
	return d.submit(op, s, &node{kind: nodeMemset, dst: p, value: value, bytes: bytes})
}

// MemcpyHtoDAsync queues a host-to-device copy; src is read when s reaches it.
func (d *Device) MemcpyHtoDAsync(dst hip.DevPtr, src []byte, s hip.Stream) error {
	const op = "MemcpyHtoDAsync"
	if _, err := d.mem.span(dst, len(src)); err != nil {
		return d.newErr(op, hip.ErrInvalidValue, err.Error())
	}
	return d.submit(op, s, &node{kind: nodeHtoD, dst: dst, host: src, bytes: len(src)})
}

// MemcpyDtoHAsync queues a device-to-host copy; dst is written when s reaches it.
func (d *Device) MemcpyDtoHAsync(dst []byte, src hip.DevPtr, s hip.Stream) error {
	const op = "MemcpyDtoHAsync"
	if _, err := d.mem.span(src, len(dst)); err != nil {
		return d.newErr(op, hip.ErrInvalidValue, err.Error())
	}
	return d.submit(op, s, &node{kind: nodeDtoH, src: src, host: dst, bytes: len(dst)})
}

// MemcpyDtoDAsync queues a device-to-device copy.
func (d *Device) MemcpyDtoDAsync(dst, src hip.DevPtr, bytes int, s hip.Stream) error {
	const op = "MemcpyDtoDAsync"
	if _, err := d.mem.span(dst, bytes); err != nil {
		return d.newErr(op, hip.ErrInvalidValue, "destination: "+err.Error())
	}
	if _, err := d.mem.span(src, bytes); err != nil {
		return d.newErr(op, hip.ErrInvalidValue, "source: "+err.Error())
	}
	return d.submit(op, s, &node{kind: nodeDtoD, dst: dst, src: src, bytes: bytes})
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}
