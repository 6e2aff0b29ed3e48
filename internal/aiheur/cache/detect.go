package cache

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Detection: every cache watches its own shared state the way a
// happens-before race detector (Go's -race, TSan) does, so that the pre-fix
// pattern is caught in every run instead of only when it happens to crash.
//
// A thread is a goroutine. Go's memory model, and its race detector, order
// memory between goroutines, not OS threads: two goroutines that share an
// OS thread one after the other still race if nothing orders them, and one
// goroutine that moves between OS threads does not race with itself. (The
// stress scenario locks each worker goroutine to its own OS thread, so
// there the two coincide.) Go has no cheap goroutine id, so threadID reads
// it from the goroutine's stack header, about 2 µs; only the unlocked cache
// pays that on every Get, the fixed caches only when they insert.
//
// The locations are the cache's map and each entry. For each the detector
// keeps which thread last wrote it, in which synchronization epoch and
// when (and, for the unlocked map, the last read too). An access races
// with an earlier conflicting one made by another thread when nothing the
// cache knows of orders the two:
//
//   - locked: every access holds the mutex, and the epoch is the lock
//     acquisition. A write is released by its Unlock and acquired by the
//     next Lock, so every access is ordered and nothing is checked.
//   - lockfree: the epoch is the snapshot generation. A reader acquires
//     the snapshot it loads; an entry it finds there must have been
//     published in that generation or earlier. One from a later
//     generation was written into a live snapshot: a race (one compare on
//     the hit path).
//   - unlocked: there is no synchronization at all. Only a Barrier, which
//     the caller declares at a point where every thread using the cache
//     has synchronized with it, advances the epoch. An access from another
//     thread in the same epoch as the last write (or, for a write, the
//     last read) is a race. Two threads sharing the cache therefore race
//     in every run, whatever the timing: one of them inserts, and the
//     other's next Get reads or writes the map it wrote.
//
// Synchronization outside the cache (a channel, a WaitGroup) is invisible
// to it: callers declare it with Barrier. That is the property the fix
// needs: MIOpen's callers are arbitrary threads, and the cache must be safe
// without their help.
//
// Two consequences are recorded too: a published model destroyed (an
// insert that releases a model another caller could already hold), and a
// use-after-free (a model released while a reader held it, or held after
// it was released). Readers say so with Hold and Held.Done; the count is
// only observed, it never delays or prevents a release.

// Kind names what a record is about.
type Kind string

// The three kinds of record.
const (
	// KindRace is an access to the map or an entry, not ordered by any
	// synchronization after another thread's conflicting access.
	KindRace Kind = "race"
	// KindDestroyed is a published model released by the cache (an insert
	// over an existing entry). Once published, a model must live for the
	// process.
	KindDestroyed Kind = "published model destroyed"
	// KindUseAfterFree is a model released while a reader held it, or a
	// reader taking hold of a model already released.
	KindUseAfterFree Kind = "use-after-free"
)

// Kinds lists the kinds of record, in the order reports show them.
var Kinds = []Kind{KindUseAfterFree, KindDestroyed, KindRace}

func kindIndex(k Kind) int {
	switch k {
	case KindRace:
		return 0
	case KindDestroyed:
		return 1
	case KindUseAfterFree:
		return 2
	}
	panic(fmt.Sprintf("cache: unknown record kind %q", k))
}

// Thread identifies a goroutine in a record: its id and, when it named
// itself with NameThread, that name.
type Thread struct {
	ID   uint64 `json:"goroutine"`
	Name string `json:"name,omitempty"`
}

func (t Thread) String() string {
	switch {
	case t.ID == 0:
		return "an unknown goroutine"
	case t.Name != "":
		return fmt.Sprintf("%s (goroutine %d)", t.Name, t.ID)
	}
	return fmt.Sprintf("goroutine %d", t.ID)
}

var threadNames sync.Map // goroutine id -> name

// NameThread names the calling goroutine in records (e.g. "thread 2" for
// the stress scenario's second worker). Names are kept for the process, so
// that a record can name a thread that has since exited (goroutine ids are
// never reused): name a bounded number of goroutines. It costs a
// goroutine-id lookup: call it once per goroutine.
func NameThread(name string) {
	threadNames.Store(threadID(), name)
}

func thread(id uint64) Thread {
	t := Thread{ID: id}
	if name, ok := threadNames.Load(id); ok {
		t.Name = name.(string)
	}
	return t
}

// threadID is the calling goroutine's id, read from its stack header
// ("goroutine 18 [running]:"). Ids start at 1 and are never reused.
func threadID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	const prefix = "goroutine "
	if n <= len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range buf[len(prefix):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

var processStart = time.Now()

// now is the time since the process started (monotonic), so that records
// from different caches compare.
func now() time.Duration { return time.Since(processStart) }

// Record is one detection, with what a report's notes need.
type Record struct {
	Kind Kind `json:"kind"`
	// Cache names the cache (Options.Name); Key is the key involved.
	Cache string `json:"cache"`
	Key   string `json:"key"`
	// Thread made the racing access, the destroying insert, the release
	// under a reader, or the late hold.
	Thread Thread `json:"thread"`
	// Race: Access ("read" or "write") of Location ("map" or "entry"),
	// after Other's OtherAccess of it, Since earlier.
	Access      string `json:"access,omitempty"`
	Location    string `json:"location,omitempty"`
	OtherAccess string `json:"other_access,omitempty"`
	// Other is, for a race, the thread of the earlier access; for a
	// destroyed model or a use-after-free, the thread that published the
	// model.
	Other Thread `json:"other"`
	// Since is, for a race, the time since the earlier access; for a
	// destroyed model or a release under readers, how long the model had
	// been published; for a late hold, the time since the release.
	Since time.Duration `json:"since_ns"`
	// Readers is how many readers held the model when it was released.
	Readers int64 `json:"readers"`
	// LateHold marks a use-after-free seen by the reader: it took hold of
	// a model already released.
	LateHold bool `json:"late_hold,omitempty"`
	// At is when, since the process started.
	At time.Duration `json:"at_ns"`
}

func (r Record) String() string {
	where := fmt.Sprintf("the %s cache", r.Cache)
	if r.Cache == "" {
		where = "the cache"
	}
	readers := fmt.Sprintf("%d readers held it", r.Readers)
	if r.Readers == 1 {
		readers = "1 reader held it"
	} else if r.Readers == 0 {
		readers = "no reader held it"
	}
	switch r.Kind {
	case KindRace:
		return fmt.Sprintf("%s %s %s's %s (key %s) %v after %s %s it, with no lock held and no barrier between",
			r.Thread, pastTense(r.Access), where, r.Location, r.Key, round(r.Since), r.Other, pastTense(r.OtherAccess))
	case KindDestroyed:
		return fmt.Sprintf("%s's insert of %s into %s destroyed the model %s had published %v earlier; %s",
			r.Thread, r.Key, where, r.Other, round(r.Since), readers)
	case KindUseAfterFree:
		if r.LateHold {
			return fmt.Sprintf("%s took hold of the %s model of %s %v after it was released", r.Thread, r.Key, where, round(r.Since))
		}
		return fmt.Sprintf("%s released the %s model of %s while %s (published by %s %v earlier)",
			r.Thread, r.Key, where, readers, r.Other, round(r.Since))
	}
	return fmt.Sprintf("%s: %s, key %s, %s", r.Kind, where, r.Key, r.Thread)
}

func pastTense(access string) string {
	switch access {
	case "read":
		return "read"
	case "write":
		return "wrote"
	}
	return access
}

// round keeps durations readable in notes (1.234ms, 12µs).
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}

// Tally is how many records of one kind were made, and the first.
type Tally struct {
	Count uint64  `json:"count"`
	First *Record `json:"first,omitempty"`
}

// Detections are a cache's (or a set of caches') records: counts and the
// first of each kind. The zero value means nothing was detected.
type Detections struct {
	Races        Tally `json:"races"`
	Destroyed    Tally `json:"published_destroyed"`
	UseAfterFree Tally `json:"use_after_free"`
}

// Of returns the tally of one kind.
func (d Detections) Of(k Kind) Tally {
	switch k {
	case KindRace:
		return d.Races
	case KindDestroyed:
		return d.Destroyed
	case KindUseAfterFree:
		return d.UseAfterFree
	}
	return Tally{}
}

// Any reports whether anything was detected.
func (d Detections) Any() bool {
	return d.Races.Count+d.Destroyed.Count+d.UseAfterFree.Count > 0
}

func (d Detections) String() string {
	return fmt.Sprintf("use-after-free %d, published model destroyed %d, races %d",
		d.UseAfterFree.Count, d.Destroyed.Count, d.Races.Count)
}

// Records collects detections; caches that share one (Options.Records)
// report together. Safe for concurrent use.
type Records struct {
	counts  [3]atomic.Uint64
	first   [3]atomic.Pointer[Record]
	onFirst func(Record)
}

// NewRecords makes an empty collection. onFirst, if not nil, is called
// with the first record of each kind as it is made, on the goroutine that
// made it (possibly several at once): a process that may crash right after
// can print it then, so that the record outlives the crash.
func NewRecords(onFirst func(Record)) *Records { return &Records{onFirst: onFirst} }

// add counts a record of kind k; build makes it, only if it is the first.
func (r *Records) add(k Kind, build func() Record) {
	i := kindIndex(k)
	r.counts[i].Add(1)
	if r.first[i].Load() != nil {
		return
	}
	rec := build()
	rec.Kind = k
	if r.first[i].CompareAndSwap(nil, &rec) && r.onFirst != nil {
		r.onFirst(rec)
	}
}

// Detections returns the counts and first records so far.
func (r *Records) Detections() Detections {
	tally := func(k Kind) Tally {
		i := kindIndex(k)
		t := Tally{Count: r.counts[i].Load()}
		if f := r.first[i].Load(); f != nil {
			c := *f
			t.First = &c
		}
		return t
	}
	return Detections{Races: tally(KindRace), Destroyed: tally(KindDestroyed), UseAfterFree: tally(KindUseAfterFree)}
}

// access is one remembered access to a location: thread, epoch, time.
type access struct {
	thread, epoch atomic.Uint64
	at            atomic.Int64
}

func (a *access) remember(thread, epoch uint64, at time.Duration) {
	a.thread.Store(thread)
	a.epoch.Store(epoch)
	a.at.Store(int64(at))
}

// shadow is what the detector remembers of the unlocked map: its last
// write, its last read, and the read before that by another thread (a
// thread's own read, as every insert makes first, must not hide another
// thread's). Like TSan's few shadow cells, it is exact for two threads
// and may forget readers beyond.
type shadow struct{ write, read, otherRead access }

// entry is a cached model and what the detector knows of it. Everything
// but the atomics is written before the entry is published.
type entry[K comparable, V any] struct {
	key   K
	model V
	// The insert: its epoch (see above), thread and time.
	epoch     uint64
	publisher uint64
	published time.Duration
	// released is when the cache released the model (+1; 0: never).
	released atomic.Int64
	// uafRecorded keeps one use-after-free record per model.
	uafRecorded atomic.Bool
	readers     readerCount
}

func newEntry[K comparable, V any](key K, model V, epoch, publisher uint64) *entry[K, V] {
	return &entry[K, V]{key: key, model: model, epoch: epoch, publisher: publisher, published: now()}
}

// Held is a model a caller is using, from Hold until Done. The count of
// holders is only observed (see the package doc): holding never delays or
// prevents a release.
type Held[V any] struct {
	Model V
	cell  *readerCell
}

// Done says the holder has finished with the model. Call it once.
func (h Held[V]) Done() {
	if h.cell != nil {
		h.cell.n.Add(-1)
	}
}

// detector is a cache's side of detection.
type detector struct {
	records *Records
	name    string
	// barrier is the epoch the unlocked cache orders accesses by.
	barrier atomic.Uint64
}

func newDetector(o Options) detector {
	r := o.Records
	if r == nil {
		r = NewRecords(nil)
	}
	return detector{records: r, name: o.Name}
}

// hold counts a reader of e and records a use-after-free if e was already
// released. The order (count, then look) pairs with release's (mark, then
// count): whichever comes second sees the other.
func hold[K comparable, V any](d *detector, e *entry[K, V]) Held[V] {
	cell := e.readers.cell()
	cell.n.Add(1)
	if r := e.released.Load(); r != 0 && e.uafRecorded.CompareAndSwap(false, true) {
		d.records.add(KindUseAfterFree, func() Record {
			at := now()
			return Record{Cache: d.name, Key: fmt.Sprint(e.key), Thread: thread(threadID()), Other: thread(e.publisher),
				Since: at - time.Duration(r-1), Readers: e.readers.sum(), LateHold: true, At: at}
		})
	}
	return Held[V]{Model: e.model, cell: cell}
}

// destroy records the release of a published entry by thread me, before
// the caller releases the model.
func destroy[K comparable, V any](d *detector, e *entry[K, V], me uint64) {
	at := now()
	e.released.Store(int64(at) + 1)
	readers := e.readers.sum()
	rec := func() Record {
		return Record{Cache: d.name, Key: fmt.Sprint(e.key), Thread: thread(me), Other: thread(e.publisher),
			Since: at - e.published, Readers: readers, At: at}
	}
	d.records.add(KindDestroyed, rec)
	if readers > 0 && e.uafRecorded.CompareAndSwap(false, true) {
		d.records.add(KindUseAfterFree, rec)
	}
}

// unsynced checks an access by thread me to the unlocked map, made with
// no synchronization: it races with the last write, and a write also with
// the last read, made by another thread since the last barrier. Then it
// remembers the access.
func unsynced[K comparable](d *detector, loc *shadow, me uint64, write bool, key K) {
	epoch, at := d.barrier.Load(), now()
	what := "read"
	if write {
		what = "write"
	}
	check := func(prev *access, prevWhat string) {
		other := prev.thread.Load()
		if other == 0 || other == me || prev.epoch.Load() != epoch {
			return
		}
		d.records.add(KindRace, func() Record {
			return Record{Cache: d.name, Key: fmt.Sprint(key), Thread: thread(me), Access: what, Location: "map",
				Other: thread(other), OtherAccess: prevWhat, Since: at - time.Duration(prev.at.Load()), At: at}
		})
	}
	check(&loc.write, "write")
	if write {
		check(&loc.read, "read")
		check(&loc.otherRead, "read")
		loc.write.remember(me, epoch, at)
		return
	}
	if prev := loc.read.thread.Load(); prev != me {
		loc.otherRead.remember(prev, loc.read.epoch.Load(), time.Duration(loc.read.at.Load()))
	}
	loc.read.remember(me, epoch, at)
}

// unsyncedEntry checks thread me's unsynchronized read of entry e against
// its only write, the insert.
func unsyncedEntry[K comparable, V any](d *detector, e *entry[K, V], me uint64) {
	if e.publisher == me || e.epoch != d.barrier.Load() {
		return
	}
	d.records.add(KindRace, func() Record {
		at := now()
		return Record{Cache: d.name, Key: fmt.Sprint(e.key), Thread: thread(me), Access: "read", Location: "entry",
			Other: thread(e.publisher), OtherAccess: "write", Since: at - e.published, At: at}
	})
}

// unpublished records a read, through a snapshot of generation gen, of an
// entry published in a later generation: it was written into a snapshot
// readers already had.
func unpublished[K comparable, V any](d *detector, e *entry[K, V], gen uint64) {
	d.records.add(KindRace, func() Record {
		at := now()
		where := fmt.Sprintf("entry (published in snapshot %d, read through snapshot %d)", e.epoch, gen)
		return Record{Cache: d.name, Key: fmt.Sprint(e.key), Thread: thread(threadID()), Access: "read", Location: where,
			Other: thread(e.publisher), OtherAccess: "write", Since: at - e.published, At: at}
	})
}
