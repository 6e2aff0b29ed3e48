package gpulib

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

// Ticket is the small integer a host function is enqueued with as its C
// user data; the ticket table maps it back to the Go function. Go pointers
// never cross into C this way, and no callback is created per launch
// (purego allows at most 2000 per process, never freed).
type Ticket uint64

// TicketKind says how often a ticket may fire.
type TicketKind int

const (
	// OneShot tickets fire once (a host function on a stream) and are then
	// forgotten.
	OneShot TicketKind = iota
	// Repeating tickets fire every time a graph that holds the host node
	// runs, until they are forgotten.
	Repeating
)

// TicketStats counts what the trampoline did.
type TicketStats struct {
	Fired    uint64 // functions run
	Stale    uint64 // tickets fired after they were used up or forgotten
	Unknown  uint64 // tickets never issued (zero, or beyond the last issued)
	Panicked uint64 // functions that panicked (recovered; the process lives on)
	Live     int    // tickets registered and not yet used up or forgotten
}

// TicketTable maps tickets to host functions. All methods are safe for
// concurrent use; Fire runs on the runtime's own callback thread and never
// blocks on anything but the table's short critical section.
type TicketTable struct {
	mu   sync.Mutex
	last Ticket
	live map[Ticket]ticketEntry

	fired, stale, unknown, panicked atomic.Uint64
	lastPanic                       atomic.Value // string
}

type ticketEntry struct {
	fn   func()
	kind TicketKind
}

// NewTicketTable returns an empty table.
func NewTicketTable() *TicketTable {
	return &TicketTable{live: map[Ticket]ticketEntry{}}
}

// Register stores fn and returns its ticket (never zero).
func (t *TicketTable) Register(fn func(), kind TicketKind) Ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	t.live[t.last] = ticketEntry{fn: fn, kind: kind}
	return t.last
}

// Forget drops a ticket that will not fire (its launch failed, or the graph
// that held it is gone). It reports whether the ticket was live.
func (t *TicketTable) Forget(tk Ticket) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.live[tk]
	delete(t.live, tk)
	return ok
}

// Fire runs the function of ticket userData. A ticket that is unknown, used
// up or forgotten is ignored and counted. A panicking function is recovered
// and counted: a panic here would abort the process from a C thread.
func (t *TicketTable) Fire(userData uintptr) {
	tk := Ticket(userData)
	t.mu.Lock()
	e, ok := t.live[tk]
	if ok && e.kind == OneShot {
		delete(t.live, tk)
	}
	last := t.last
	t.mu.Unlock()
	if !ok {
		if tk == 0 || tk > last {
			t.unknown.Add(1)
		} else {
			t.stale.Add(1)
		}
		return
	}
	defer func() {
		if r := recover(); r != nil {
			t.panicked.Add(1)
			t.lastPanic.Store(fmt.Sprint(r))
		}
	}()
	t.fired.Add(1)
	e.fn()
}

// Stats returns the counters.
func (t *TicketTable) Stats() TicketStats {
	t.mu.Lock()
	live := len(t.live)
	t.mu.Unlock()
	return TicketStats{
		Fired:    t.fired.Load(),
		Stale:    t.stale.Load(),
		Unknown:  t.unknown.Load(),
		Panicked: t.panicked.Load(),
		Live:     live,
	}
}

// LastPanic is the value of the most recent recovered panic, or "".
func (t *TicketTable) LastPanic() string {
	s, _ := t.lastPanic.Load().(string)
	return s
}

// HostFuncs is the process-wide ticket table behind HostFnTrampoline.
var HostFuncs = NewTicketTable()

var hostTrampoline = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(userData uintptr) { HostFuncs.Fire(userData) })
})

// HostFnTrampoline is the one C function pointer of type void(*)(void*)
// (CUhostFn, hipHostFn_t) for the whole process. Enqueue it with a ticket
// from HostFuncs.Register as user data.
func HostFnTrampoline() uintptr { return hostTrampoline() }

// CaptureTickets keeps the Repeating tickets of host functions recorded
// during stream capture alive for as long as a graph or executable graph
// that holds them exists, and forgets them when the last one is destroyed
// (or the capture fails). One per device.
type CaptureTickets struct {
	table *TicketTable

	mu        sync.Mutex
	capturing map[uint64][]Ticket // capture id -> tickets recorded so far
	graphs    map[uintptr]*ticketGroup
	execs     map[uintptr]*ticketGroup
}

type ticketGroup struct {
	tickets []Ticket
	refs    int
}

// NewCaptureTickets tracks tickets of table.
func NewCaptureTickets(table *TicketTable) *CaptureTickets {
	return &CaptureTickets{
		table:     table,
		capturing: map[uint64][]Ticket{},
		graphs:    map[uintptr]*ticketGroup{},
		execs:     map[uintptr]*ticketGroup{},
	}
}

// Add records that tk was captured by the capture with the given id.
func (c *CaptureTickets) Add(captureID uint64, tk Ticket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capturing[captureID] = append(c.capturing[captureID], tk)
}

// Remove takes back a ticket whose capture call failed.
func (c *CaptureTickets) Remove(captureID uint64, tk Ticket) {
	c.mu.Lock()
	list := c.capturing[captureID]
	for i, t := range list {
		if t == tk {
			c.capturing[captureID] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	c.table.Forget(tk)
}

// Ended moves the tickets of a finished capture to its graph; a zero graph
// (the capture failed or was torn down) forgets them.
func (c *CaptureTickets) Ended(captureID uint64, graph uintptr) {
	c.mu.Lock()
	list := c.capturing[captureID]
	delete(c.capturing, captureID)
	if graph != 0 && len(list) > 0 {
		c.graphs[graph] = &ticketGroup{tickets: list, refs: 1}
		list = nil
	}
	c.mu.Unlock()
	c.forget(list)
}

// Instantiated lets exec share the tickets of graph.
func (c *CaptureTickets) Instantiated(graph, exec uintptr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.graphs[graph]; g != nil {
		g.refs++
		c.execs[exec] = g
	}
}

// GraphDestroyed drops graph's hold on its tickets.
func (c *CaptureTickets) GraphDestroyed(graph uintptr) { c.release(c.graphs, graph) }

// ExecDestroyed drops exec's hold on its tickets.
func (c *CaptureTickets) ExecDestroyed(exec uintptr) { c.release(c.execs, exec) }

func (c *CaptureTickets) release(m map[uintptr]*ticketGroup, h uintptr) {
	c.mu.Lock()
	g := m[h]
	delete(m, h)
	var drop []Ticket
	if g != nil {
		g.refs--
		if g.refs == 0 {
			drop = g.tickets
		}
	}
	c.mu.Unlock()
	c.forget(drop)
}

// Close forgets every ticket still tracked.
func (c *CaptureTickets) Close() {
	c.mu.Lock()
	var drop []Ticket
	for _, l := range c.capturing {
		drop = append(drop, l...)
	}
	seen := map[*ticketGroup]bool{}
	for _, m := range []map[uintptr]*ticketGroup{c.graphs, c.execs} {
		for _, g := range m {
			if !seen[g] {
				seen[g] = true
				drop = append(drop, g.tickets...)
			}
		}
	}
	c.capturing = map[uint64][]Ticket{}
	c.graphs = map[uintptr]*ticketGroup{}
	c.execs = map[uintptr]*ticketGroup{}
	c.mu.Unlock()
	c.forget(drop)
}

// Tracked counts the tickets held by captures, graphs and executable graphs.
func (c *CaptureTickets) Tracked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.capturing {
		n += len(l)
	}
	seen := map[*ticketGroup]bool{}
	for _, m := range []map[uintptr]*ticketGroup{c.graphs, c.execs} {
		for _, g := range m {
			if !seen[g] {
				seen[g] = true
				n += len(g.tickets)
			}
		}
	}
	return n
}

func (c *CaptureTickets) forget(list []Ticket) {
	for _, tk := range list {
		c.table.Forget(tk)
	}
}
